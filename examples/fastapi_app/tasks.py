"""The example's task: its result is kept for an hour, so a route can await it."""

from rqueue import task


@task(keep_result=3600)
def count_words(text: str) -> int:
    return len(text.split())
