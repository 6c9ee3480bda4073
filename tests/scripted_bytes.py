"""A scripted source of random bytes for the aggregators' exactness tests."""

from __future__ import annotations


class Script:
    """Hands out fixed chunks in order and checks the size of each request."""

    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = list(chunks)

    def __call__(self, n: int) -> bytes:
        assert self.chunks, "more random bytes requested than scripted"
        chunk = self.chunks.pop(0)
        assert len(chunk) == n, (len(chunk), n)
        return chunk
