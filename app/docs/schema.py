"""The documents index's tables.

Texts are kept once per hash and documents point at them, so a file that is in a collection
and attached to a conversation too is cut and indexed once. A collection's files are keyed by
path (a re-index finds them again); an attachment, having no collection, by its hash. The FTS5
table takes its text from `chunks` (external content), so passages are not stored twice.
"""

from __future__ import annotations

from app.docs.vectors import SCHEMA as VECTORS_SCHEMA

SCHEMA = """
create table if not exists meta(key text primary key, value text);
create table if not exists texts(
    sha256 text primary key,
    kind text not null,
    pages integer not null default 0,
    page_starts text not null default '[]',
    text text not null
);
create table if not exists chunks(
    id integer primary key,
    sha256 text not null references texts(sha256),
    seq integer not null,
    start integer not null,
    end_ integer not null,
    where_ text not null default '',
    text text not null
);
create index if not exists chunks_by_text on chunks(sha256, seq);
create table if not exists collections(name text primary key, root text not null, indexed_at real);
create table if not exists documents(
    id integer primary key,
    sha256 text not null references texts(sha256),
    name text not null,
    path text not null,
    kind text not null,
    pages integer not null default 0,
    mtime real,
    size integer,
    collection text not null default '',
    indexed_at real
);
create unique index if not exists documents_in_collection on documents(collection, path)
    where collection != '';
create unique index if not exists attachments on documents(sha256) where collection = '';
create index if not exists documents_by_text on documents(sha256);
""" + VECTORS_SCHEMA


def fts_schema(tokenizer: str) -> str:
    return f"""
create virtual table if not exists chunks_fts using fts5(
    text, where_, content='chunks', content_rowid='id', tokenize='{tokenizer}'
);
create trigger if not exists chunks_ai after insert on chunks begin
    insert into chunks_fts(rowid, text, where_) values (new.id, new.text, new.where_);
end;
create trigger if not exists chunks_ad after delete on chunks begin
    insert into chunks_fts(chunks_fts, rowid, text, where_) values ('delete', old.id, old.text, old.where_);
end;
"""
