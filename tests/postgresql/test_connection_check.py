"""The pool's connection check (readmodel.store.postgres.idle_connection_alive) in a busy process.

A reader or daemon may hold more than 1,024 descriptors (a server with many clients, a long
test run); select() refuses those, and a check built on it took every connection for dead.
"""

from __future__ import annotations

import os

import psycopg

from readmodel.store.postgres import idle_connection_alive


def test_a_sound_connection_on_a_descriptor_above_1024_is_alive(postgres_url: str) -> None:
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 2048:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(4096, hard), hard))
    held = [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]
    try:
        with psycopg.connect(postgres_url) as conn:
            assert conn.fileno() >= 1024
            assert idle_connection_alive(conn)
            conn.close()
            assert not idle_connection_alive(conn)
    finally:
        for fd in held:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
