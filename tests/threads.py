"""Running test code in several threads at once: each target in its own thread, the first error raised after all
have ended (an exception inside a thread would otherwise only be printed)."""

import threading


def run_in_threads(*targets, timeout: float = 120) -> None:
    errors: list = []

    def wrap(fn):
        def run():
            try:
                fn()
            except BaseException as e:  # noqa: BLE001 -- raised in the calling thread below
                errors.append(e)

        return run

    threads = [threading.Thread(target=wrap(fn)) for fn in targets]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=timeout)
    if errors:
        raise errors[0]
