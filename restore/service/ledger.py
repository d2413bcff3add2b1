"""The operation ledger's door: what a record of operation items may do to the ledger an
open session keeps (restore/engine/subsystems/operations.py), decided before anything is
written. A repeated state is a no-op; a state that moves an operation backwards (a
committed edit started again, say) is refused, and nothing of the record is written."""

from __future__ import annotations

import copy

from protocol.errors import ErrorKind, ProtocolError
from restore.engine.subsystems import operations
from restore.service.sessions import OpenSession
from restore.stores.records import Item


def check(session: OpenSession, items: list[Item]) -> tuple[list[Item], int]:
    """The items to write (no-ops dropped) and how many no-ops there were; raises
    ConflictingOperation for an operation moved backwards."""
    if not any(item.get("type") == "operation" for item in items):
        return items, 0
    simulated = copy.deepcopy(session.state.states["operations"])
    kept: list[Item] = []
    no_ops = 0
    for item in items:
        if item.get("type") != "operation" or session.writer.seq_of(item["id"]) is not None:
            kept.append(item)
            continue
        verdict = operations.transition(simulated, item)
        if verdict == "conflict":
            previous = simulated["open"].get(item["operationId"], {}).get("state") or (
                simulated["closed"].get(item["operationId"])
            )
            raise ProtocolError(
                ErrorKind.CONFLICTING_OPERATION,
                f"operation {item['operationId']} is {previous}; it cannot become {item['state']}",
                operationId=item["operationId"],
                recordedState=previous,
                requestedState=item["state"],
            )
        if verdict == "duplicate":
            no_ops += 1
            continue
        operations.reduce(simulated, item)
        kept.append(item)
    return kept, no_ops
