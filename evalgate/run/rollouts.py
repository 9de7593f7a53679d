"""What a run keeps in memory of its rollouts: columns of numbers, not a dict per rollout.

The journal (results.jsonl) holds every record in full. Summaries, budget stops, sequential looks
and costs read a few fields of each: the item, the rollout index, the reward and metrics, the
error, the token usage, whether the reply was blank, a reported cost. :class:`RolloutTable`
stores those as typed arrays (~50 bytes a rollout where a record dict costs kilobytes with its
prompt and completion) and hands out a small read-only dict per rollout when iterated, so the
code that reads records reads it unchanged. bench/rollout_memory.py measures it.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from operator import itemgetter, not_, or_
from typing import TYPE_CHECKING, Any

from evalgate.run._columns import HASH_BYTES, LIMIT, NAN, add_scores, add_usage, pack_hash
from evalgate.run.item_ids import ItemIds, ItemValues, Lookup
from evalgate.run.item_means import dyadic, fsum_means
from evalgate.run.scored import finite_floats, unusable

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = ["RolloutTable"]

_ROLLOUT_LIMIT = LIMIT["I"]  # a rollout index fits the "I" column (records.py checks the same)
_JUDGE_FIELDS = ("usage", "cost_usd", "consistent", "worse_order")
# The fields of a batch of common records (check_batch), each a tuple over the batch.
_BATCH_FIELDS = itemgetter(
    "example_id", "rollout", "reward", "metrics", "usage", "group", "item_hash", "error",
    "completion",
)  # fmt: skip


# eq=False, repr=False: never compared (an identity, not a value); the generated methods would be
# compiled from source at every start-up (dataclasses exec each one: issue #36).
@dataclass(eq=False, repr=False)
class Batch:
    """A batch of common records :meth:`RolloutTable.check_batch` found fit to add as one."""

    index: npt.NDArray[np.int64]  # per record, its item's index (new items: the next ones)
    new: list[int]  # the places of the records that are a new item's first
    rollout: tuple[int, ...]
    columns: list[tuple[array[Any], Iterable[Any]]]  # (column, its values over the batch)
    blank: bytes
    hashes: bytes  # per record, its packed content hash
    ids: tuple[str, ...]
    looked: Lookup  # the ids looked up (ItemIds.extend adds the new ones where they ended)


def _finite(values: Iterable[float]) -> bool:
    """Whether every float is finite: fsum is exact, so it is finite only if each is (an
    intermediate overflow, or ±inf and NaN, is not)."""
    try:
        return math.isfinite(math.fsum(values))
    except (OverflowError, ValueError):
        return False


class RolloutTable:
    """Rollouts appended as records, iterated back as slim records (in the order appended)."""

    def __init__(self) -> None:
        # Per item, in the order first seen: its id (and id → index: a compact table, see
        # run/item_ids.py), its group (where it has one) and its content hash, as its first
        # record gave them. The engine's hash (16 lowercase hex digits: run.fingerprint.
        # item_hash) is kept as its 8 bytes in one buffer, any other (None, a hand-made one)
        # beside it: a million items, 8 MB where a tuple and a hash string each took ~130.
        self._ids = ItemIds()
        self._groups: dict[int, str] = {}
        self._hashes = bytearray()
        self._odd_hashes: dict[int, str | None] = {}
        # Where each item's first line starts in the journal it was read from (the run-folder
        # reader fills it; empty otherwise): the texts of a few items are read from there.
        # 4 bytes an item ("I") while the journal is under 4 GiB, then 8 ("q": read_records).
        self.item_offsets: array[int] = array("I")
        self._item = array("I")
        self._rollout = array("I")
        self._reward = array("d")
        self._blank = bytearray()
        self._usage: dict[str, array[int]] = {}  # token counts ("I", widened to "q" if need be)
        self._metrics: dict[str, array[float]] = {}
        self._errors: dict[int, str] = {}  # row → error message (errors are few)
        self._costs: dict[int, float] = {}  # row → cost_usd, where a suite reported one
        # row → a judge's tokens, cost and position-swap consistency (the metadata's judge
        # figures); its reasoning and raw replies stay in the journal.
        self._judges: dict[int, dict[str, object]] = {}
        self._served: dict[int, list[str]] = {}  # row → served_by, where a fallback answered
        # row → the reward recorded, of a rollout kept as errored for an unusable score (the
        # report page lists it by the journal's own fields: no error, that reward)
        self._unusable: dict[int, object] = {}
        self._n = 0

    def __len__(self) -> int:
        return self._n

    @property
    def errored(self) -> int:
        """Rollouts that errored (or scored NaN, ±inf: :func:`unusable`)."""
        return len(self._errors)

    def append(self, rec: dict[str, Any]) -> int:
        """Add one record; returns its item's index (in the order items were first seen)."""
        row = self._n
        ids = self._ids
        known = ids.size  # the attribute, not len(): once a rollout (the engine's, live)
        index = ids.add(rec["example_id"])
        if index == known:
            self._add_item(rec.get("group"), rec.get("item_hash", ""))
        self._item.append(index)
        self._rollout.append(rec.get("rollout", 0))  # a hand-made record may leave it out
        error, reward = rec["error"], rec["reward"]
        # unusable()'s common answer first, inline: a finite float reward and metrics.
        usable = error is None and (
            reward is None or (type(reward) is float and reward - reward == 0.0)
        )
        if usable:
            for value in rec["metrics"].values():
                if type(value) is not float or value - value != 0.0:
                    usable = False
                    break
        if error is None and not usable:
            error = unusable(rec)
            if error is not None:  # kept as an error, its values dropped
                self._unusable[row] = rec.get("reward")
                rec = {**rec, "reward": None, "metrics": {}, "error": error}
                reward = None
        self._reward.append(NAN if reward is None else float(reward))
        completion = rec.get("completion")
        blank = completion is None or (isinstance(completion, str) and not completion.strip())
        self._blank.append(1 if blank else 0)
        add_usage(self._usage, rec.get("usage") or {}, row)
        add_scores(self._metrics, rec["metrics"], row)
        if rec["error"] is not None:
            self._errors[row] = rec["error"]
        if rec.get("cost_usd") is not None:
            self._costs[row] = rec["cost_usd"]
        judge = rec.get("judge")
        if judge:
            self._judges[row] = {k: judge[k] for k in _JUDGE_FIELDS if k in judge}
        if rec.get("served_by"):  # costs price these tokens as the model that answered
            self._served[row] = rec["served_by"]
        self._n += 1
        return index

    def _add_item(self, group: str | None, ihash: str | None) -> None:
        """The new item's group and content hash (its id was just added to ``_ids``)."""
        if group is None and type(ihash) is str and len(ihash) == 2 * HASH_BYTES:
            # The common case first, without pack_hash's checks: no group, the engine's 16
            # lowercase hex digits (a live run's every new item, a journal's read a line at a
            # time). fromhex takes spaces and capitals too: the round trip says it was those.
            try:
                engine = bytes.fromhex(ihash)
            except ValueError:
                engine = b""
            if engine.hex() == ihash:
                self._hashes += engine
                return
        index = len(self._ids) - 1
        if group is not None:
            self._groups[index] = group
        packed = pack_hash(ihash)
        if packed is None:
            self._odd_hashes[index] = ihash
            packed = bytes(HASH_BYTES)
        self._hashes += packed

    def items(self) -> list[tuple[str, str | None, str | None]]:
        """(example_id, group, item_hash) of each item, as its first rollout recorded them, in
        the order first seen (a tuple per item: readers at scale use :attr:`n_items`,
        :meth:`item_id`, :meth:`item_group`, :meth:`item_hash`)."""
        return [
            (self._ids[i], self._groups.get(i), self.item_hash(i)) for i in range(len(self._ids))
        ]

    @property
    def n_items(self) -> int:
        """Distinct items (no pass over the rows)."""
        return len(self._ids)

    def item_ids(self) -> list[str]:
        """Each item's id, in the order first seen."""
        return list(self._ids)

    def item_id(self, index: int) -> str:
        return self._ids[index]

    def item_group(self, index: int) -> str | None:
        return self._groups.get(index)

    @property
    def has_groups(self) -> bool:
        """Whether any item has a group."""
        return bool(self._groups)

    def same_hash(self, index: int, ihash: str | None) -> bool:
        """Whether ``ihash`` is the content hash item ``index``'s first record gave."""
        if index in self._odd_hashes:
            return self._odd_hashes[index] == ihash
        packed = pack_hash(ihash)
        at = HASH_BYTES * index
        return packed is not None and self._hashes[at : at + HASH_BYTES] == packed

    @property
    def id_table(self) -> ItemIds:
        """The items' ids (and id → index), as the table keeps them."""
        return self._ids

    def id_codes(self) -> npt.NDArray[np.int64]:
        """Each item's ``hash()`` of its id (equal ids, equal codes: a join's first pass)."""
        return self._ids.codes()

    def content_hashes(self) -> tuple[npt.NDArray[np.uint64], frozenset[int]]:
        """(each item's packed content hash, the items whose hash is not the engine's, whose
        packed value is 0 and which :meth:`same_hash` alone compares)."""
        import numpy as np

        return np.frombuffer(bytes(self._hashes), dtype=np.uint64), frozenset(self._odd_hashes)

    def item_hash(self, index: int) -> str | None:
        """The content hash the item's first record gave."""
        if index in self._odd_hashes:
            return self._odd_hashes[index]
        return self._hashes[HASH_BYTES * index : HASH_BYTES * (index + 1)].hex()

    def served(self) -> dict[str, frozenset[str]]:
        """item id → the models other than the configured one that answered its rollouts
        (items no fallback answered are left out)."""
        out: dict[str, set[str]] = {}
        for row, by in self._served.items():
            out.setdefault(self._ids[self._item[row]], set()).update(by)
        return {item: frozenset(names) for item, names in out.items()}

    def priced_rows(self) -> Iterator[dict[str, Any]]:
        """The costs pass's fields (``cost_usd``, ``judge``, ``served_by``) of only the rows that
        have one, in row order: :func:`~evalgate.run.manifest.run_costs` reads nothing else, and
        most runs have none (no dict built per row)."""
        rows = self._costs.keys() | self._judges.keys() | self._served.keys()
        for row in sorted(rows):
            yield self._priced(row, {})

    def _priced(self, row: int, rec: dict[str, Any]) -> dict[str, Any]:
        """``rec`` with row ``row``'s cost, judgement and fallback model, where it has them."""
        if row in self._costs:
            rec["cost_usd"] = self._costs[row]
        if row in self._judges:
            rec["judge"] = self._judges[row]
        if row in self._served:
            rec["served_by"] = self._served[row]
        return rec

    def extend(self, records: Iterable[dict[str, Any]]) -> None:
        for rec in records:
            self.append(rec)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        usage, metrics = list(self._usage.items()), list(self._metrics.items())
        for row in range(self._n):
            yield self._row(row, usage, metrics)

    def _row(
        self,
        row: int,
        usage: list[tuple[str, array[int]]],
        metrics: list[tuple[str, array[float]]],
    ) -> dict[str, Any]:
        index = self._item[row]
        example_id, group, ihash = self._ids[index], self._groups.get(index), self.item_hash(index)
        reward = self._reward[row]
        rec: dict[str, Any] = {
            "example_id": example_id,
            "item_hash": ihash,
            "rollout": self._rollout[row],
            "group": group,
            "reward": None if math.isnan(reward) else reward,
            "error": self._errors.get(row),
            "completion": "" if self._blank[row] else "…",  # only blank or not is kept
            "usage": {name: col[row] for name, col in usage},
            "metrics": {n: v for n, col in metrics if not math.isnan(v := col[row])},
        }
        return self._priced(row, rec)

    def add_checked(self, value: dict[str, Any]) -> int:
        """:meth:`append` of a record the run-folder reader has checked field by field (types,
        ranges), taken as read: keys only summaries read may be missing (an older or hand-made
        run: read as the engine writes them), and an errored rollout's scores, which nothing
        reads, are not kept. No copy of the record is made (a million rollouts are read)."""
        if value.get("error") is not None or not finite_floats(value):
            # The rare record (errored; an int, NaN or infinite score): the general path, on a
            # copy with the defaults filled in and an error's scores dropped.
            row_value = {"rollout": 0, "item_hash": None, "reward": None, "metrics": {}, **value}
            if row_value.get("error") is not None:
                row_value["reward"], row_value["metrics"] = None, {}
            else:
                row_value["error"] = None
            return self.append(row_value)
        row = self._n
        known = len(self._ids)
        index = self._ids.add(value["example_id"])
        if index == known:
            self._add_item(value.get("group"), value.get("item_hash"))
        self._item.append(index)
        self._rollout.append(value.get("rollout", 0))
        metrics = value.get("metrics") or {}
        reward = value.get("reward")
        self._reward.append(NAN if reward is None else reward)
        completion = value.get("completion")
        # Blank as str.strip() sees it, without the stripped copy of a long completion.
        blank = completion is None or (
            type(completion) is str and (not completion or completion.isspace())
        )
        self._blank.append(1 if blank else 0)
        add_usage(self._usage, value.get("usage") or {}, row)
        add_scores(self._metrics, metrics, row)
        if value.get("cost_usd") is not None:
            self._costs[row] = value["cost_usd"]
        judge = value.get("judge")
        if judge:
            self._judges[row] = {k: judge[k] for k in _JUDGE_FIELDS if k in judge}
        if value.get("served_by"):
            self._served[row] = value["served_by"]
        self._n += 1
        return index

    def add_common(self, value: dict[str, Any]) -> int:
        """:meth:`add_checked` of the common record, checked here as the run-folder reader
        checks it (records.py's ``_plain_record``) in the same pass: no error, cost, judge or
        fallback; a finite float reward (or none); finite float metrics and int token counts
        under the names the table already has. Returns its item's index, or −1 with nothing
        added for any other record (the reader then checks and adds it the general way).
        One call a rollout instead of a dozen (a million rollouts a run)."""
        get = value.get
        item_id, rollout, reward = get("example_id"), get("rollout", 0), get("reward")
        metrics, usage, group, ihash = get("metrics"), get("usage"), get("group"), get("item_hash")
        if (
            type(item_id) is not str
            or type(rollout) is not int
            or not 0 <= rollout < _ROLLOUT_LIMIT
            or (reward is not None and (type(reward) is not float or reward - reward != 0.0))
            or type(metrics) is not dict
            or type(usage) is not dict
            or (group is not None and type(group) is not str)
            or (ihash is not None and type(ihash) is not str)
            or get("error") is not None
            or get("cost_usd") is not None
            or get("judge") is not None
            or get("served_by")
        ):
            return -1
        scores, counts = self._metrics, self._usage
        if len(metrics) != len(scores) or len(usage) != len(counts):
            return -1
        for name, score in metrics.items():
            if type(score) is not float or score - score != 0.0 or name not in scores:
                return -1
        for name, count in usage.items():
            col = counts.get(name)
            if type(count) is not int or col is None or not 0 <= count < LIMIT[col.typecode]:
                return -1
        ids = self._ids
        known = ids.size
        index = ids.add(item_id)
        if index == known:
            self._add_item(group, ihash)
        self._item.append(index)
        self._rollout.append(rollout)
        self._reward.append(NAN if reward is None else reward)
        completion = get("completion")
        # Blank as str.strip() sees it, without the stripped copy of a long completion.
        blank = completion is None or (
            type(completion) is str and (not completion or completion.isspace())
        )
        self._blank.append(1 if blank else 0)
        for name, count in usage.items():
            counts[name].append(count)
        for name, score in metrics.items():
            scores[name].append(score)
        self._n += 1
        return index

    def check_batch(self, values: Iterable[Any]) -> Batch | None:
        """:meth:`add_common`'s checks of every record of a batch at once, in passes over the
        batch's fields (a journal is read a batch of lines at a time: records.py), and what
        adding them takes; nothing is added. None when any record is not the common one, or
        not one :meth:`add_common` adds as is: an item whose content hash is not the engine's
        or differs from its first record's, a group. The reader then reads that batch a line
        at a time (the same checks, one line's message). ``values``: the parsed lines, each
        let go once its fields are taken (a record holds its prompt and completion)."""
        if not self._n:
            return None  # the first record makes the columns (add_checked)
        try:
            fields = [
                (*_BATCH_FIELDS(v), v.get("cost_usd"), v.get("judge"), v.get("served_by"))
                for v in values
            ]
        except (KeyError, TypeError, ValueError):  # a field left out, not an object, not JSON
            return None
        if not fields:
            return None
        count = len(fields)
        (
            ids,
            rollouts,
            rewards,
            metrics,
            usage,
            groups,
            hashes,
            errors,
            completions,
            costs,
            judges,
            served,
        ) = zip(*fields, strict=True)
        del fields
        if (
            set(map(type, ids)) != {str}
            or set(map(type, rollouts)) != {int}
            or not 0 <= min(rollouts) <= max(rollouts) < _ROLLOUT_LIMIT
            or errors.count(None) != count
            or groups.count(None) != count
            or costs.count(None) != count
            or judges.count(None) != count
            or any(served)
            or set(map(type, hashes)) != {str}
            or set(map(len, hashes)) != {2 * HASH_BYTES}
        ):
            return None
        joined = "".join(hashes)
        try:
            packed = bytes.fromhex(joined)
        except ValueError:
            return None
        if packed.hex() != joined:  # the engine's: lowercase hex digits only
            return None
        reward_types = set(map(type, rewards))
        if not reward_types <= {float, type(None)}:
            return None
        if type(None) in reward_types:  # no reward: NaN in the column
            if not _finite([r for r in rewards if r is not None]):
                return None
            rewards = tuple(NAN if r is None else r for r in rewards)
        elif not _finite(rewards):
            return None
        columns: list[tuple[array[Any], Iterable[Any]]] = [
            (self._rollout, rollouts),
            (self._reward, rewards),
        ]
        scores, counts = self._metrics, self._usage
        if set(map(type, metrics)) != {dict} or set(map(len, metrics)) != {len(scores)}:
            return None
        if set(map(type, usage)) != {dict} or set(map(len, usage)) != {len(counts)}:
            return None
        try:
            for name, col in scores.items():
                got = tuple(map(itemgetter(name), metrics))
                if set(map(type, got)) != {float} or not _finite(got):
                    return None
                columns.append((col, got))
            for name, tally in counts.items():
                tokens = tuple(map(itemgetter(name), usage))
                if (
                    set(map(type, tokens)) != {int}
                    or not 0 <= min(tokens) <= max(tokens) < LIMIT[tally.typecode]
                ):
                    return None
                columns.append((tally, tokens))
        except KeyError:
            return None
        if set(map(type, completions)) == {str}:  # blank as add_common sees it
            blank = bytes(map(or_, map(not_, completions), map(str.isspace, completions)))
        else:
            blank = bytes(
                c is None or (type(c) is str and (not c or c.isspace())) for c in completions
            )
        import numpy as np  # the reader batches only once numpy is loaded (records.py)

        looked = self._ids.lookup(list(ids))
        index, new = looked.found, looked.new
        # Every record of an item seen before carries its first record's hash (same_hash).
        mine = np.frombuffer(packed, dtype=np.uint64)
        first = np.empty(count, dtype=np.uint64)
        known = len(self._ids)
        old = index < known
        if old.any():
            if self._odd_hashes and not self._odd_hashes.keys().isdisjoint(index[old].tolist()):
                return None
            first[old] = np.frombuffer(self._hashes, dtype=np.uint64)[index[old]]
        fresh = ~old
        first[fresh] = mine[np.asarray(new, dtype=np.intp)][index[fresh] - known]
        if not np.array_equal(first, mine):
            return None
        return Batch(index, new, rollouts, columns, blank, packed, ids, looked)

    def add_batch(self, batch: Batch) -> None:
        """Add the records of a batch :meth:`check_batch` found fit: the table is then as
        :meth:`add_common` of each in turn leaves it."""
        import numpy as np

        if len(batch.new) == len(batch.ids):  # every record a new item
            self._ids.extend(list(batch.ids), batch.looked)
        else:
            self._ids.extend([batch.ids[p] for p in batch.new], batch.looked)
        if len(batch.new) == len(batch.index):
            self._hashes += batch.hashes
        else:
            packed = np.frombuffer(batch.hashes, dtype=np.uint64)
            self._hashes += packed[np.asarray(batch.new, dtype=np.intp)].tobytes()
        self._item.frombytes(batch.index.astype(np.uint32).tobytes())
        for col, got in batch.columns:
            col.extend(got)
        self._blank += batch.blank
        self._n += len(batch.index)

    def _scored(self) -> npt.NDArray[np.bool_]:
        """A bool mask of the rows without an error (numpy)."""
        import numpy as np

        ok = np.ones(self._n, dtype=bool)
        if self._errors:
            ok[np.fromiter(self._errors, dtype=np.int64, count=len(self._errors))] = False
        return ok

    def first_rows(self, *, answered: bool = False) -> npt.NDArray[np.int64]:
        """Per item (in the order first seen), the row of its first rollout (``answered``: its
        first whose record has no error; an unusable score is not one), −1 where none: which
        journal line holds what a report shows of it."""
        import numpy as np

        recorded = [row for row in self._errors if row not in self._unusable] if answered else []
        if not recorded:  # every item's first row: where the items seen so far grow by one
            return self._item_starts()
        item = np.frombuffer(self._item, dtype=np.uint32).astype(np.intp)
        ok = np.ones(self._n, dtype=bool)
        ok[np.array(recorded, dtype=np.int64)] = False
        rows = np.nonzero(ok)[0]
        del ok
        first = np.full(len(self._ids), self._n, dtype=np.int64)
        np.minimum.at(first, item[rows], rows)
        return np.where(first < self._n, first, -1)

    def _item_starts(self) -> npt.NDArray[np.int64]:
        """Per item, the row of its first rollout. Items are numbered in the order first seen,
        so item i first appears where the running maximum of the item column reaches i: ~13
        bytes a row of temporaries where a minimum per item (``np.minimum.at``) took ~33 and
        ten times the time (a million rollouts, read back for a report's rows)."""
        import numpy as np

        item = np.frombuffer(self._item, dtype=np.uint32)
        if not item.size:
            return np.zeros(0, dtype=np.int64)
        reached = np.maximum.accumulate(item)
        new = np.empty(item.size, dtype=bool)
        new[0] = True
        np.greater(reached[1:], reached[:-1], out=new[1:])
        del reached
        return np.flatnonzero(new).astype(np.int64, copy=False)

    def index_of(self, example_id: str) -> int | None:
        """The item's index (its place in :meth:`items`), None when the run has no such item."""
        index = self._ids.find(example_id)
        return None if index < 0 else index

    def outcomes(
        self,
    ) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.intp], dict[int, str]]:
        """Per item, as the journal's own fields give it: (mean of its finite rewards of
        rollouts without a recorded error (NaN: none), rollouts counted, item index → its first
        recorded error): the report page's per-item outcome, from the columns."""
        import numpy as np

        n_items = len(self._ids)
        # Views of the columns (bincount reads the uint32 items as they are); the rewards are
        # copied only when some row's must change: a million rollouts, no 50 MB of copies.
        item = np.frombuffer(self._item, dtype=np.uint32)
        reward = np.frombuffer(self._reward, dtype=np.float64)
        recorded = {row: e for row, e in self._errors.items() if row not in self._unusable}
        if self._unusable or recorded:
            reward = reward.copy()
        for row, value in self._unusable.items():  # an unusable score: its reward as recorded
            if isinstance(value, int | float) and math.isfinite(value):
                reward[row] = float(value)
            else:
                reward[row] = NAN
        if recorded:
            reward[np.fromiter(recorded, dtype=np.int64, count=len(recorded))] = NAN
        good = ~np.isnan(reward) & np.isfinite(reward)
        counted, weights = (item, reward) if good.all() else (item[good], reward[good])
        del good
        count = np.bincount(counted, minlength=n_items)
        total = np.bincount(counted, weights=weights, minlength=n_items)
        del counted, weights
        with np.errstate(invalid="ignore", divide="ignore"):
            mean = np.where(count > 0, total / np.maximum(count, 1), NAN)
        first_error: dict[int, str] = {}
        for row in sorted(recorded):
            if recorded[row]:
                first_error.setdefault(int(item[row]), recorded[row])
        return mean, count, first_error

    def tally(self) -> tuple[dict[str, str], list[str], int, dict[str, int]]:
        """What a summary counts per rollout, from the columns (no dict per row): each item's
        group, the error messages in row order, the scored rollouts whose completion was blank,
        and the token usage summed per name; as a pass over the rows would count them (items
        without a group are left out of the groups)."""
        groups = {self._ids[i]: group for i, group in sorted(self._groups.items())}
        errors = [self._errors[row] for row in sorted(self._errors) if self._errors[row]]
        blank = self._blank  # 0 or 1 a row: the blank rows, less the errored ones among them
        empty = blank.count(1) - sum(blank[row] for row in self._errors)
        usage = {name: int(sum(col)) for name, col in self._usage.items()}
        return groups, errors, empty, usage

    def scored(self) -> Iterator[tuple[str, float | None, dict[str, float]]]:
        """(item id, reward, metrics) of each row without an error, in row order, as its dict
        (:meth:`__iter__`) gives them: what scoring items reads of a row (the summary's per-item
        means of a run too small for numpy), without building the rest of the row."""
        ids, item, reward, errors = list(self._ids), self._item, self._reward, self._errors
        metrics = list(self._metrics.items())
        for row in range(self._n):
            if row in errors:
                continue
            value = reward[row]
            yield (
                ids[item[row]],
                None if value != value else value,  # NaN: no reward
                {name: v for name, col in metrics if (v := col[row]) == v},
            )

    def item_metrics(self, rollouts: int, success: float) -> dict[str, ItemValues]:
        """metric → {item id: mean of its scored rollouts' values}, plus pass@k / pass^k (k =
        ``rollouts`` > 1, a rollout succeeding at reward ≥ ``success``) for items with k scored
        rollouts: what :func:`evalgate.run.summary.item_metrics` computes from the records, in
        the same order and to the same bits, from the columns (numpy: views of the columns
        where every row counts, a few bytes a row of temporaries otherwise), each as an
        :class:`~evalgate.run.item_ids.ItemValues` (columns, not a dict per item)."""
        import numpy as np

        if not self._n:
            return {}
        item = np.frombuffer(self._item, dtype=np.uint32)
        rows: slice | np.ndarray = slice(None) if not self._errors else self._scored_rows()
        if not item[rows].size:
            return {}
        ranked = self._ranked_items(item, rows)
        rank = np.full(len(self._ids), len(self._ids), dtype=np.int64)
        rank[ranked] = np.arange(ranked.size)
        # (rank of the first item, 0 for a metric / 1, 2 for pass@k, pass^k, name, values):
        # the records' pass lists a metric when its first item is first met.
        keyed: list[tuple[int, int, str, ItemValues]] = []
        for name, col in self._metrics.items():
            per = self._metric_means(item, rows, np.frombuffer(col, dtype=np.float64))
            if per is None:
                continue
            count, means = per
            present = ranked[count[ranked] > 0]
            values = ItemValues(self._ids, present, means[present])
            keyed.append((int(rank[present[0]]), 0, name, values))
        if rollouts > 1:
            keyed += self._pass_rates(item, rows, ranked, rank, rollouts, success)
        keyed.sort(key=lambda entry: (entry[0], entry[1], entry[2] if entry[1] == 0 else ""))
        return {name: values for _, _, name, values in keyed}

    def _scored_rows(self) -> npt.NDArray[np.intp]:
        import numpy as np

        return np.nonzero(self._scored())[0]

    def _ranked_items(
        self, item: npt.NDArray[np.uint32], rows: slice | npt.NDArray[np.intp]
    ) -> npt.NDArray[np.intp]:
        """Items in the order of their first scored rollout (the records' pass keeps that
        order): item indices are given in the order first seen, so with no error that is
        theirs."""
        import numpy as np

        n_items = len(self._ids)
        if isinstance(rows, slice):
            return np.arange(n_items)
        first = np.full(n_items, self._n, dtype=np.int64)
        np.minimum.at(first, item[rows], rows)
        seen = np.nonzero(first < self._n)[0]
        return seen[np.argsort(first[seen], kind="stable")]

    def _metric_means(
        self,
        item: npt.NDArray[np.uint32],
        rows: slice | npt.NDArray[np.intp],
        values: npt.NDArray[np.float64],
    ) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.float64]] | None:
        """(rollouts counted, mean) per item of one metric column, over ``rows`` and the rows
        that have the metric; None when no row has it."""
        import numpy as np

        n_items = len(self._ids)
        missing = np.isnan(values)
        where: slice | npt.NDArray[np.intp] = rows
        if missing.any():
            clean = isinstance(rows, slice)
            where = np.nonzero(~missing if clean else self._scored() & ~missing)[0]
        del missing
        per = item[where]
        if not per.size:
            return None
        count = np.bincount(per, minlength=n_items)
        picked = values[where]
        if dyadic(picked):
            means = np.bincount(per, weights=picked, minlength=n_items) / np.maximum(count, 1)
        else:  # rounding could differ from fmean: the exact sum per item, as it did
            means = fsum_means(per.astype(np.intp), picked, n_items, count)
        return count, means

    def _pass_rates(
        self,
        item: npt.NDArray[np.uint32],
        rows: slice | npt.NDArray[np.intp],
        ranked: npt.NDArray[np.intp],
        rank: npt.NDArray[np.int64],
        rollouts: int,
        success: float,
    ) -> list[tuple[int, int, str, ItemValues]]:
        """pass@k and pass^k of the items with k scored rollouts, keyed as item_metrics sorts
        them (after the metrics their first item starts)."""
        import numpy as np

        from evalgate import stats

        n_items = len(self._ids)
        item_ok = item[rows]
        scored = np.bincount(item_ok, minlength=n_items)
        reward = np.frombuffer(self._reward, dtype=np.float64)[rows]
        wins = np.bincount(item_ok[reward >= success], minlength=n_items)
        full = ranked[scored[ranked] >= rollouts]
        if not full.size:
            return []
        # One float per distinct (n, c), shared by the items that have it.
        code = scored[full].astype(np.int64) * (self._n + 1) + wins[full]
        distinct, which = np.unique(code, return_inverse=True)
        pairs = [divmod(c, self._n + 1) for c in distinct.tolist()]
        at = np.array([stats.pass_at_k(n, c, rollouts) for n, c in pairs])
        hat = np.array([stats.pass_hat_k(n, c, rollouts) for n, c in pairs])
        picks = which.ravel()
        start = int(rank[full[0]])
        return [
            (start, 1, f"pass@{rollouts}", ItemValues(self._ids, full, at[picks])),
            (start, 2, f"pass^{rollouts}", ItemValues(self._ids, full, hat[picks])),
        ]

    @classmethod
    def ordered(cls, parts: Iterable[RolloutTable], order: dict[str, int]) -> RolloutTable:
        """The rows of ``parts`` in one table, sorted by (``order`` of their item, rollout):
        a resumed run's kept rollouts and its new ones in run order, without a dict per row."""
        import numpy as np  # only a resumed run merges (start-up time of every other run)

        parts = list(parts)
        unknown = len(order)
        span = 1 + max((max(t._rollout, default=0) for t in parts), default=0)
        keys = []
        for part in parts:
            places = np.array(
                [order.get(example_id, unknown) for example_id in part._ids], dtype=np.int64
            )
            item = np.frombuffer(part._item, dtype=np.uint32) if part._n else np.zeros(0, int)
            rollout = np.frombuffer(part._rollout, dtype=np.uint32) if part._n else np.zeros(0, int)
            keys.append(places[item] * span + rollout if part._n else np.zeros(0, np.int64))
        # Stable: rows of one key keep their order (the parts' order, then appended order), as
        # sorting the records themselves did.
        sequence = np.argsort(np.concatenate(keys), kind="stable")
        sizes = [t._n for t in parts]
        part_of = np.repeat(np.arange(len(parts)), sizes)[sequence]
        row_of = sequence - np.cumsum([0, *sizes])[:-1][part_of]
        columns = [(list(t._usage.items()), list(t._metrics.items())) for t in parts]
        out = cls()
        step = 1 << 16  # a block at a time: no list of a million ints
        for at in range(0, len(sequence), step):
            block = zip(
                part_of[at : at + step].tolist(), row_of[at : at + step].tolist(), strict=True
            )
            for p, row in block:
                out.append(parts[p]._row(row, *columns[p]))
        return out

    def __add__(self, other: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
        return [*self, *other]

    def __radd__(self, other: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
        return [*other, *self]
