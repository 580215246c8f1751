"""`frozen` and `define`: attrs' decorators of the same names, with `repr`, `==` and `hash`
written once here instead of generated for every class.

attrs writes each class's methods as Python source and compiles it when the class is built.
A cold `lobster` process builds about sixty of the VM's classes before it runs anything, and
the generated `__repr__` and `__eq__`/`__hash__` were two fifths of that cost (about 13 ms of a
66 ms start-up, measured on the run path's imports). The methods below behave as attrs' do:
`repr` lists the fields whose `repr` is on, `==` compares the fields whose `eq` is on between
instances of exactly the same class, a frozen record hashes those fields, a mutable one is
unhashable. A class that writes one of these methods itself keeps its own. The options that
would change those methods (`eq`, `order`, `hash`, `unsafe_hash`, `repr`, `cmp`) and a field's
`eq=<key function>` are refused when the class is built: use attrs itself for such a class.
"""

from __future__ import annotations

import threading
from collections import namedtuple
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import attrs

__all__ = ["built_on_first_use", "define", "frozen", "named_tuple"]


def _repr(self: Any) -> str:
    shown = ", ".join(f"{a.name}={getattr(self, a.name)!r}"
                      for a in type(self).__attrs_attrs__ if a.repr)
    return f"{type(self).__qualname__.rsplit('>.', 1)[-1]}({shown})"  # as attrs: no <locals>


def _compared(self: Any) -> tuple:
    return tuple(getattr(self, a.name) for a in type(self).__attrs_attrs__ if a.eq)


def _eq(self: Any, other: Any) -> Any:
    if type(other) is not type(self):
        return NotImplemented
    return _compared(self) == _compared(other)


def _ne(self: Any, other: Any) -> Any:
    equal = _eq(self, other)
    return equal if equal is NotImplemented else not equal


def _hash(self: Any) -> int:
    return hash((type(self), _compared(self)))


# attrs options the shared methods do not honour
_REFUSED = ("eq", "order", "hash", "unsafe_hash", "repr", "cmp")


def _build(cls: type, decorator: Any, hashable: bool, options: dict[str, Any]) -> type:
    refused = [name for name in _REFUSED if name in options]
    if refused:
        raise TypeError(f"{cls.__qualname__}: vm.core.records does not take {', '.join(refused)}"
                        f" (its repr, == and hash are shared); use attrs directly")
    own = {name for name in ("__repr__", "__eq__", "__ne__", "__hash__") if name in vars(cls)}
    built = decorator(cls, repr=False, eq=False, **options)
    keyed = [a.name for a in built.__attrs_attrs__ if a.eq_key is not None]
    if keyed:
        raise TypeError(f"{cls.__qualname__}: field {', '.join(keyed)} compares by a key "
                        f"function, which vm.core.records does not apply; use attrs directly")
    shared = {"__repr__": _repr, "__eq__": _eq, "__ne__": _ne,
              "__hash__": _hash if hashable else None}
    for name, method in shared.items():
        if name not in own:
            setattr(built, name, method)
    return built


if TYPE_CHECKING:  # a type checker reads them as attrs' own, which they behave as
    from attrs import define, frozen
else:
    def frozen(maybe_cls: type | None = None, **options: Any) -> Any:
        """`attrs.frozen`, with the shared methods: instances compare and hash by value."""
        def wrap(cls: type) -> type:
            return _build(cls, attrs.frozen, True, options)

        return wrap if maybe_cls is None else wrap(maybe_cls)


    def define(maybe_cls: type | None = None, **options: Any) -> Any:
        """`attrs.define`, with the shared methods: instances compare by value and are unhashable
        unless `frozen=True` (they can change)."""
        def wrap(cls: type) -> type:
            return _build(cls, attrs.define, bool(options.get("frozen")), options)

        return wrap if maybe_cls is None else wrap(maybe_cls)


def built_on_first_use(namespace: dict[str, Any], names: Iterable[str],
                       build: Callable[[], Iterable[type]],
                       then: Callable[[], None] | None = None) -> Callable[[str], Any]:
    """A module `__getattr__` (PEP 562: only names the module does not hold yet come to it)
    that builds the module's record classes when one of `names` is first read: `build()`
    gives the classes, each put in the module as if written at its top level (repr, pickle),
    and `then()` adds what is made of them. Two threads reading at once get the same ones."""
    wanted, lock = frozenset(names), threading.Lock()

    def __getattr__(name: str) -> Any:
        if name not in wanted:
            raise AttributeError(f"module {namespace['__name__']!r} has no attribute {name!r}")
        with lock:
            if name not in namespace:
                for cls in build():
                    cls.__qualname__ = cls.__name__
                    namespace[cls.__name__] = cls
                if then is not None:
                    then()
        return namespace[name]

    return __getattr__


def named_tuple(cls: type) -> type:
    """`typing.NamedTuple`'s class syntax (annotated fields, defaults, methods, a docstring)
    made by `collections.namedtuple`. typing's own turns every field's annotation into a
    ForwardRef when the module has `from __future__ import annotations`, compiling each:
    a five-field tuple cost three times what this does (1.4 million instructions against 0.5)
    at every start."""
    body = vars(cls)
    fields = tuple(cls.__annotations__ if "__annotations__" in body else ())
    defaults = [body[name] for name in fields if name in body]
    if any(name not in body for name in fields[len(fields) - len(defaults):]):
        raise TypeError(f"{cls.__qualname__}: a field without a default follows one with one")
    if cls.__bases__ != (object,):
        raise TypeError(f"{cls.__qualname__}: a named tuple derives from no other class")
    if any(_names_its_class(value) for value in body.values()):
        raise TypeError(f"{cls.__qualname__}: super() and __class__ would name the class this "
                        "decorator replaces")
    base = namedtuple(cls.__name__, fields, defaults=defaults, module=cls.__module__)
    own = {name: value for name, value in body.items()
           if name not in fields and name not in ("__dict__", "__weakref__")}
    if own.get("__doc__") is None:
        own["__doc__"] = base.__doc__  # namedtuple's own
    return type(cls.__name__, (base,), {**own, "__slots__": ()})


def _names_its_class(value: Any) -> bool:
    """Whether a method (plain, class or static) uses super() or __class__."""
    code = getattr(getattr(value, "__func__", value), "__code__", None)
    return code is not None and "__class__" in code.co_freevars
