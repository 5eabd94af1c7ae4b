"""Which messages to a task's host travel pickled by tf_accum, and that they come back whole."""

from __future__ import annotations

import numpy as np
import pytest

from tf_accum.distributed.small_messages import (
    PIECE_BYTES,
    SMALL_BYTES,
    array_bytes,
    is_small,
    pack,
    pieces_for,
    split,
    unpack,
)


@pytest.mark.parametrize(
    "values",
    [
        [],
        [1, 2.5, True, None, "name"],
        [np.int64(3), np.float32(0.5), np.array(7, np.int64)],
        [np.zeros(SMALL_BYTES // 8, np.float32), np.zeros(SMALL_BYTES // 8, np.float32)],
    ],
)
def test_numbers_strings_and_arrays_up_to_the_limit_are_small(values: list[object]) -> None:
    assert is_small(values)


@pytest.mark.parametrize(
    "values",
    [
        [np.zeros(SMALL_BYTES // 4 + 1, np.float32)],
        [np.zeros(SMALL_BYTES // 8, np.float32), np.zeros(SMALL_BYTES // 8 + 1, np.float32)],
        [np.array(["a", "b"], dtype=object)],  # its bytes are not its size
        [[1, 2]],  # a container: its size is not known without walking it
        [object()],  # an ObjectRef, say: only Ray may serialise it
    ],
)
def test_large_arrays_and_unknown_values_are_left_to_ray(values: list[object]) -> None:
    assert not is_small(values)


def test_a_packed_message_unpacks_to_equal_values_and_others_pass_through() -> None:
    message = ("ok", [(np.arange(3, dtype=np.int32),), (), (np.float32(2.5), 4)])
    packed = pack(message)
    assert type(packed) is bytes
    back = unpack(packed)
    assert back[0] == "ok" and back[1][1] == ()
    assert back[1][0][0].dtype == np.int32 and back[1][0][0].tolist() == [0, 1, 2]
    assert back[1][2] == (np.float32(2.5), 4) and type(back[1][2][0]) is np.float32
    assert unpack(message) is message


def test_array_bytes_counts_arrays_and_refuses_what_only_ray_may_serialise() -> None:
    assert array_bytes([np.zeros(10, np.float32), np.zeros(3, np.int64), 5, "x"]) == 64
    assert array_bytes([np.float32(1.0)]) == 0
    assert array_bytes([object()]) is None
    assert array_bytes([np.array(["a"], dtype=object)]) is None


def test_a_message_split_into_pieces_unpacks_whole() -> None:
    message = ("ok", [(np.arange(100_000, dtype=np.float32),)])
    pieces = split(message)
    assert len(pieces) == pieces_for(len(pack(message))) == -(-400_000 // PIECE_BYTES) > 1
    assert all(type(piece) is bytes and len(piece) <= PIECE_BYTES for piece in pieces)
    back = unpack(*pieces)
    assert back[0] == "ok" and back[1][0][0].tolist() == message[1][0][0].tolist()
    # asked for more pieces than it needs: the last ones are empty, and it still unpacks
    many = split(message, len(pieces) + 3)
    assert len(many) == len(pieces) + 3
    assert unpack(*many)[1][0][0].tolist() == message[1][0][0].tolist()
    # one piece is the message packed
    assert split(("x", 1)) == (pack(("x", 1)),) == split(("x", 1), 1)
    assert unpack(*split(("x", 1), 4)) == ("x", 1)


def test_a_split_messages_arrays_come_back_equal_writable_and_aligned() -> None:
    rng = np.random.default_rng(0)
    arrays = [
        rng.random((784, 100), dtype=np.float32),
        np.arange(7, dtype=np.int8),  # odd sizes: the next array must still be aligned
        np.asfortranarray(rng.random((30, 20))),
        rng.random((40, 40))[::2],  # not contiguous: pickled with the rest
        np.zeros((0, 3), np.float64),
        np.float32(2.5),
    ]
    message = ("ok", [tuple(arrays)], b"raw", 5)
    back = unpack(*split(message, 5))
    assert back[2:] == (b"raw", 5)
    for sent, got in zip(arrays, back[1][0], strict=True):
        assert type(got) is type(sent) and got.dtype == sent.dtype and got.shape == sent.shape
        assert np.array_equal(got, sent)
        if isinstance(got, np.ndarray):
            assert got.flags.writeable and got.flags.aligned
    assert back[1][0][2].flags.f_contiguous
    back[1][0][0][0, 0] = -1.0  # the caller's own: writing changes nothing else
    assert back[1][0][1].tolist() == list(range(7))
