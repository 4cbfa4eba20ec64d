import sqlite3
import threading

import pytest

from mera_pipelines.core.llm.cache import CachedResponse, ResponseCache, cache_key

MESSAGES = [{"role": "user", "content": "What did Alice drink?"}]


def test_key_changes_with_every_field_that_changes_the_reply():
    base = cache_key("m", MESSAGES, 64, 0.0, True)
    assert base == cache_key("m", [dict(MESSAGES[0])], 64, 0.0, True)
    variants = {
        cache_key("other", MESSAGES, 64, 0.0, True),
        cache_key("m", [{"role": "user", "content": "What did Bob drink?"}], 64, 0.0, True),
        cache_key("m", MESSAGES, 65, 0.0, True),
        cache_key("m", MESSAGES, 64, 0.7, True),
        cache_key("m", MESSAGES, 64, 0.0, False),
        cache_key("m", MESSAGES, 64, 0.0, True, extra={"extra_body": {"x": 1}}),
    }
    assert base not in variants and len(variants) == 6
    assert cache_key("m", MESSAGES, 64, 0.0, True, extra={}) == base


def test_miss_then_hit_survives_reopening(tmp_path):
    path = tmp_path / "sub" / "cache.sqlite"
    key = cache_key("m", MESSAGES, 64, 0.0, False)
    with ResponseCache(path) as cache:
        assert cache.get(key) is None
        cache.put(key, CachedResponse("Tea.", 12, 2, "m", tag="mem-1", repaired=True))
    with ResponseCache(path) as reopened:
        hit = reopened.get(key)
    assert hit == CachedResponse("Tea.", 12, 2, "m", tag="mem-1", repaired=True, json_mode=False)


def test_delete_tag_removes_only_that_memory(tmp_path):
    with ResponseCache(tmp_path / "c.sqlite") as cache:
        for index, tag in enumerate(["mem-1", "mem-1", "mem-2", None]):
            cache.put(f"k{index}", CachedResponse(f"t{index}", 1, 1, "m", tag=tag))
        assert cache.delete_tag("mem-1") == 2
        assert cache.get("k0") is None and cache.get("k1") is None
        assert cache.get("k2").text == "t2" and cache.get("k3").text == "t3"
        assert cache.delete_tag("mem-1") == 0
        assert len(cache) == 2


def test_delete_where_filters_by_model_and_tag_and_refuses_no_filter(tmp_path):
    with ResponseCache(tmp_path / "c.sqlite") as cache:
        cache.put("a", CachedResponse("x", 1, 1, "m1", tag="t"))
        cache.put("b", CachedResponse("x", 1, 1, "m2", tag="t"))
        cache.put("c", CachedResponse("x", 1, 1, "m1", tag="u"))
        assert cache.delete_where(model="m1", tag="t") == 1
        assert cache.delete_where(model="m2") == 1
        assert cache.get("c") is not None
        with pytest.raises(ValueError, match="needs a model or a tag"):
            cache.delete_where()
        assert cache.delete("c") is True and cache.delete("c") is False


def test_concurrent_writers_from_many_threads_lose_nothing(tmp_path):
    errors = []

    with ResponseCache(tmp_path / "c.sqlite") as cache:

        def write(worker: int) -> None:
            try:
                for item in range(25):
                    cache.put(f"{worker}-{item}", CachedResponse(f"{worker}:{item}", item, 1, "m"))
                    assert cache.get(f"{worker}-{item}").text == f"{worker}:{item}"
            except Exception as exc:  # reported below: a thread's assert does not fail the test
                errors.append(exc)

        threads = [threading.Thread(target=write, args=(worker,)) for worker in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert errors == []
        assert len(cache) == 200


def test_database_uses_write_ahead_logging(tmp_path):
    ResponseCache(tmp_path / "c.sqlite").close()
    mode = sqlite3.connect(tmp_path / "c.sqlite").execute("PRAGMA journal_mode").fetchone()[0]
    assert mode == "wal"
