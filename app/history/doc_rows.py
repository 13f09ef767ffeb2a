"""A message's documents as the messages table keeps them: a user row's attachments and an
assistant row's DocsUse, each one JSON value in its own column (read and written only with the
message, and carried the same way by the JSON transcript). A value a hand edit broke reads as
none (said in the log), so the conversation still opens.
"""

from __future__ import annotations

import json
import logging

from app.engine.message import Attachment, DocsUse

log = logging.getLogger("llamadesk.store")


def attachments_json(attachments: tuple[Attachment, ...]) -> str | None:
    return json.dumps([a.to_json() for a in attachments], ensure_ascii=False) if attachments else None


def attachments_from_json(text: str | None) -> tuple[Attachment, ...]:
    if not text:
        return ()
    try:
        return tuple(Attachment.from_json(a) for a in json.loads(text))
    except (ValueError, TypeError, KeyError, AttributeError) as e:
        log.warning("a message's stored attachments cannot be read (%s); shown without them", e)
        return ()


def docs_json(docs: DocsUse | None) -> str | None:
    return None if docs is None else json.dumps(docs.to_json(), ensure_ascii=False)


def docs_from_json(text: str | None) -> DocsUse | None:
    if not text:
        return None
    try:
        return DocsUse.from_json(json.loads(text))
    except (ValueError, TypeError, KeyError, AttributeError) as e:
        log.warning("a reply's stored sources cannot be read (%s); shown without them", e)
        return None
