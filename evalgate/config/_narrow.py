"""Validation through the union members a config names, not every member.

evals.yaml's ``models`` is a union of every backend and a QA benchmark's ``scorer`` one of every
scorer, the judge's among them (which holds every backend again): pydantic builds a union's
validator whole, every member's, though a config names one or two. Building those was a third of
a 1-item run's config validation (issue #36). Here a model is validated by a copy of its class
whose union field takes only the members the data names (found by the same tag the union is
discriminated by), and the result is made an instance of the class itself.

The copy accepts a value only where the whole union accepts it (the member the tag picks is the
one the union would use, with the same field settings), so its result is the class's. Where the
copy refuses the data, or the data does not name its members plainly (a tag missing or unknown,
an entry not a mapping), the class itself validates it: every error is the class's own, word
for word and at the same place.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import TYPE_CHECKING, Annotated, TypeVar, Union, get_args, get_origin

from pydantic import Field, ValidationError, create_model

if TYPE_CHECKING:
    from pydantic import BaseModel

__all__ = ["dump_narrowed", "members_by_tag", "named_members", "validate_narrowed"]

M = TypeVar("M", bound="BaseModel")


def members_by_tag(union: object, tag: str) -> dict[str, type[BaseModel]]:
    """``Annotated[A | B, Field(discriminator=tag)]`` → {tag value: member} (read from each
    member's ``Literal`` field, so a member added to the union is found here too)."""
    found: dict[str, type[BaseModel]] = {}
    for member in get_args(get_args(union)[0]):
        for value in get_args(member.model_fields[tag].annotation):
            found[value] = member
    return found


def validate_narrowed(
    cls: type[M],
    data: object,
    field: str,
    wanted: tuple[type[BaseModel], ...] | None,
    tag: str,
) -> M:
    """``cls.model_validate(data)``, with ``field``'s union narrowed to ``wanted`` (its members
    the data names; None: no narrowing) and ``tag`` the union's discriminator."""
    if wanted:
        try:
            narrowed = _narrowed(cls, field, wanted, tag).model_validate(data)
        except ValidationError:
            pass  # the class itself says what is wrong, as it always did
        else:
            # The class's own instance: the same field values and the same fields set.
            return cls.model_construct(narrowed.model_fields_set, **narrowed.__dict__)
    return cls.model_validate(data)


def dump_narrowed(model: BaseModel, field: str, tag: str) -> dict[str, object]:
    """``model.model_dump(mode="json")``, by the serializer of ``model``'s class narrowed to
    the member its ``field`` holds: the union's serializer writes a member as the member's own
    does, so the output is the same, and building the class's whole union is left to whoever
    needs it (a run's start-up writes its benchmark's config, run_config.json, before the first
    request)."""
    member = type(getattr(model, field))
    serializer = _narrowed(type(model), field, (member,), tag).__pydantic_serializer__
    dumped: dict[str, object] = serializer.to_python(model, mode="json")
    return dumped


@functools.cache
def _narrowed(
    cls: type[BaseModel], field: str, wanted: tuple[type[BaseModel], ...], tag: str
) -> type[BaseModel]:
    """A subclass of ``cls`` whose ``field`` holds only ``wanted``: a list of them when the
    field is a list, else one of them. Its default is the field's own."""
    info = cls.model_fields[field]
    one: object = wanted[0]
    if len(wanted) > 1:
        one = Annotated[Union[wanted], Field(discriminator=tag)]  # noqa: UP007 - a runtime tuple
    annotation: object = list[one] if get_origin(info.annotation) is list else one  # type: ignore[valid-type]
    if info.metadata:  # the field's constraints (`min_length`), as the class has them
        annotation = Annotated[(annotation, *info.metadata)]
    default = (
        Field(default_factory=info.default_factory) if info.default_factory else Field(info.default)
    )
    return create_model(  # type: ignore[call-overload]
        cls.__name__, __base__=cls, __module__=cls.__module__, **{field: (annotation, default)}
    )


def named_members(
    value: object, tag: str, members: Mapping[str, type[BaseModel]]
) -> tuple[type[BaseModel], ...] | None:
    """The members ``value`` (a mapping, or a non-empty list of them) names by ``tag``, in the
    union's order; None when an entry is not a mapping naming a member by its tag."""
    entries = value if isinstance(value, list) else [value]
    picked: set[type[BaseModel]] = set()
    for entry in entries:
        name = entry.get(tag) if isinstance(entry, dict) else None
        member = members.get(name) if isinstance(name, str) else None
        if member is None:
            return None
        picked.add(member)
    return tuple(m for m in members.values() if m in picked) or None
