"""Key generation for callers without a key: valid, distinct UUIDs of their version."""

import time
import uuid

from idem_client import new_key, new_key_v4


def test_keys_are_distinct_uuids_of_their_version() -> None:
    seen = set()
    for _ in range(1000):
        for key, version in ((new_key(), 7), (new_key_v4(), 4)):
            parsed = uuid.UUID(key)
            assert str(parsed) == key and len(key) == 36
            assert parsed.version == version
            assert parsed.variant == uuid.RFC_4122
            assert key not in seen
            seen.add(key)


def test_v7_keys_carry_the_time_and_sort_by_it() -> None:
    before = time.time_ns() // 1_000_000
    first = new_key()
    after = time.time_ns() // 1_000_000
    assert before <= uuid.UUID(first).int >> 80 <= after
    time.sleep(0.002)
    assert new_key() > first
