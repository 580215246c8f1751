"""vm.core.records: the shared repr, == and hash behave as the ones attrs generates, and
`named_tuple` as typing.NamedTuple."""

from __future__ import annotations

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from vm.core import records


def twins(kind: str):
    """The same class built by attrs and by vm.core.records."""
    built = []
    for decorate in (getattr(attrs, kind), getattr(records, kind)):
        @decorate
        class Point:
            x: int
            y: tuple = ()
            note: str = attrs.field(default="", eq=False, repr=False)

        built.append(Point)
    return built


values = st.tuples(st.integers(-3, 3), st.tuples(st.integers(0, 2)), st.text(max_size=2))
FROZEN_TWINS = twins("frozen")  # built once: building classes per example is what took time


@given(values, values)
def test_frozen_records_repr_compare_and_hash_as_attrs_does(a, b):
    theirs, ours = FROZEN_TWINS
    assert repr(ours(*a)) == repr(theirs(*a))
    assert (ours(*a) == ours(*b)) == (theirs(*a) == theirs(*b))
    assert (ours(*a) != ours(*b)) == (theirs(*a) != theirs(*b))
    if ours(*a) == ours(*b):
        assert hash(ours(*a)) == hash(ours(*b))


def test_a_field_left_out_of_eq_is_neither_compared_nor_shown():
    _, Point = twins("frozen")
    assert Point(1, (2,), "a") == Point(1, (2,), "b")
    assert repr(Point(1, (2,), "a")) == "Point(x=1, y=(2,))"


def test_records_of_different_classes_are_never_equal():
    _, first = twins("frozen")
    _, second = twins("frozen")
    assert first(1) != second(1)
    assert (first(1) == 1) is False


def test_mutable_records_compare_by_value_and_are_unhashable():
    theirs, ours = twins("define")
    assert ours(1) == ours(1) and ours(1) != ours(2)
    with pytest.raises(TypeError):
        hash(ours(1))
    with pytest.raises(TypeError):
        hash(theirs(1))


def test_a_method_the_class_writes_itself_is_kept():
    @records.frozen
    class Named:
        name: str

        def __repr__(self) -> str:
            return f"<{self.name}>"

    assert repr(Named("x")) == "<x>"
    assert Named("x") == Named("x")


def test_define_frozen_true_is_hashable():
    @records.define(frozen=True)
    class Pair:
        a: int

    assert hash(Pair(1)) == hash(Pair(1))


@pytest.mark.parametrize("option", ["eq", "order", "hash", "unsafe_hash", "repr", "cmp"])
def test_an_option_the_shared_methods_would_ignore_is_refused(option):
    with pytest.raises(TypeError, match=f"does not take {option}"):
        @records.frozen(**{option: True})
        class Point:
            x: int


def test_a_field_compared_by_a_key_function_is_refused():
    with pytest.raises(TypeError, match="field name compares by a key function"):
        @records.frozen
        class Named:
            name: str = attrs.field(eq=str.lower)


def test_named_tuple_behaves_as_typing_namedtuple_does():
    """`named_tuple` against typing.NamedTuple itself, with the same class body (string
    annotations, as a module with `from __future__ import annotations` has them)."""
    import pickle
    from typing import NamedTuple

    from vm.host.store.base import Parked

    class Typed(NamedTuple):
        state_key: str
        blob: bytes
        created_at: float
        expires_at: float | None = None
        mac: bytes | None = None

    ours, theirs = Parked("k", b"b", 1.0), Typed("k", b"b", 1.0)
    assert tuple(ours) == tuple(theirs) == ("k", b"b", 1.0, None, None)
    assert Parked._fields == Typed._fields and ours._asdict() == theirs._asdict()
    assert repr(ours) == repr(theirs).replace("Typed", "Parked")
    assert ours == theirs and hash(ours) == hash(theirs)  # tuples, as typing's are
    assert ours._replace(mac=b"m").mac == b"m" and Parked._make(tuple(theirs)) == ours
    assert pickle.loads(pickle.dumps(ours)) == ours and Parked.__doc__.startswith("A parked")
    assert ours.authentic(None) is False  # the class's own methods are kept
    with pytest.raises(AttributeError):
        ours.other = 1  # no instance dict, as typing's
    with pytest.raises(TypeError, match="without a default follows"):
        @records.named_tuple
        class Bad:
            a: int = 1
            b: int
    with pytest.raises(TypeError, match="super"):
        @records.named_tuple
        class Calls:
            a: int

            def __repr__(self) -> str:
                return super().__repr__()
    with pytest.raises(TypeError, match="no other class"):
        @records.named_tuple
        class Derived(Exception):
            a: int

    @records.named_tuple
    class Undocumented:
        a: int

    assert Undocumented.__doc__ == "Undocumented(a,)"  # namedtuple's, as typing's keeps
