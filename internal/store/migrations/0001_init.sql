-- larkline schema, version 1.
-- Table and column names follow the design (lark-timeline-ingestion.md §9, §10, §12.4, §13).
-- Every statement here runs in one transaction (see migrate.go); do not add BEGIN/COMMIT
-- or CREATE INDEX CONCURRENTLY to a migration file.

-- Workspaces (incidents) as fed from the ticket system. version orders the feed: an
-- older version never overwrites a newer one.
CREATE TABLE workspaces (
    id          text        PRIMARY KEY CHECK (id <> '' AND length(id) <= 128),
    type        text        NOT NULL CHECK (type <> '' AND length(type) <= 64),
    status      text        NOT NULL CHECK (status IN ('firing', 'recovered', 'archived')),
    created_at  timestamptz NOT NULL,
    updated_at  timestamptz NOT NULL DEFAULT now(),
    version     bigint      NOT NULL CHECK (version >= 0)
);

-- The design's "Lark chat collaboration resource" bound to a workspace (§6.1). A chat may
-- be bound to several workspaces; evidence is then stored once per workspace.
CREATE TABLE workspace_chat_bindings (
    workspace_id text        NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    chat_id      text        NOT NULL CHECK (chat_id LIKE 'oc\_%' AND length(chat_id) <= 128),
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (workspace_id, chat_id)
);
CREATE INDEX workspace_chat_bindings_chat_idx ON workspace_chat_bindings (chat_id);

-- Workspace-scoped facts (§9). chat_id is a deviation from the design: a stored generated
-- column derived from the Lark message source_key (chat/<chat_id>/message/<message_id>),
-- so that a window's evidence (one chat, one time range) is read from its own index
-- instead of filtering every chat of the workspace. It can never disagree with source_key.
CREATE TABLE workspace_timeline_evidence (
    id                 bigserial   PRIMARY KEY,
    workspace_id       text        NOT NULL CHECK (workspace_id <> ''),
    source             text        NOT NULL CHECK (source <> ''),
    source_type        text        NOT NULL CHECK (source_type <> ''),
    source_key         text        NOT NULL CHECK (source_key <> ''),
    occurred_at        timestamptz NOT NULL,
    source_updated_at  timestamptz NOT NULL,
    observed_at        timestamptz NOT NULL,
    actor_id           text        NOT NULL DEFAULT '',
    actor_display_name text        NOT NULL DEFAULT '',
    content            text        NOT NULL DEFAULT '',
    content_hash       text        NOT NULL CHECK (content_hash <> ''),
    metadata_json      jsonb       NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(metadata_json) = 'object'),
    deleted            boolean     NOT NULL DEFAULT false,
    synthesis_eligible boolean     NOT NULL DEFAULT true,
    chat_id            text        GENERATED ALWAYS AS (
        CASE WHEN source = 'lark' AND source_type = 'lark_message' AND source_key LIKE 'chat/%/message/%'
             THEN split_part(source_key, '/', 2) END) STORED,
    CONSTRAINT workspace_timeline_evidence_source_key_uq
        UNIQUE (workspace_id, source, source_type, source_key)
);
-- The design's hot query (§9), with id as the keyset tie-breaker.
CREATE INDEX workspace_timeline_evidence_time_idx
    ON workspace_timeline_evidence (workspace_id, source, source_type, occurred_at, id);
-- A window's evidence: one chat of one workspace, ordered by (occurred_at, id).
CREATE INDEX workspace_timeline_evidence_chat_time_idx
    ON workspace_timeline_evidence (workspace_id, chat_id, occurred_at, id)
    WHERE chat_id IS NOT NULL;

-- Coarse sync states (§10): one chat collection checkpoint per workspace/chat
-- (status NULL) and one row per non-empty synthesis window. status and attempts are
-- denormalised from metadata_json so that stale processing windows can be found by index;
-- the store writes both together.
CREATE TABLE workspace_timeline_sync_states (
    id                     bigserial   PRIMARY KEY,
    workspace_id           text        NOT NULL CHECK (workspace_id <> ''),
    source                 text        NOT NULL CHECK (source <> ''),
    source_type            text        NOT NULL CHECK (source_type <> ''),
    source_key             text        NOT NULL CHECK (source_key <> ''),
    last_seen_updated_at   timestamptz,
    last_seen_cursor       text        NOT NULL DEFAULT '',
    last_seen_content_hash text        NOT NULL DEFAULT '',
    metadata_json          jsonb       NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(metadata_json) = 'object'),
    status                 text        CHECK (status IN ('processing', 'completed', 'ignored', 'failed')),
    attempts               integer     NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    created_at             timestamptz NOT NULL DEFAULT now(),
    updated_at             timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT workspace_timeline_sync_states_source_key_uq
        UNIQUE (workspace_id, source, source_type, source_key)
);
CREATE INDEX workspace_timeline_sync_states_processing_idx
    ON workspace_timeline_sync_states (updated_at)
    WHERE status = 'processing';

-- Curated timeline (§12.4). human_edited_at marks an entry a human changed: its text is
-- never overwritten by synthesis again.
CREATE TABLE workspace_timeline_entries (
    id              bigserial   PRIMARY KEY,
    workspace_id    text        NOT NULL CHECK (workspace_id <> ''),
    occurred_at     timestamptz NOT NULL,
    kind            text        NOT NULL CHECK (kind <> ''),
    title           text        NOT NULL,
    body            text        NOT NULL DEFAULT '',
    source          text        NOT NULL CHECK (source IN ('ai', 'human')),
    status          text        NOT NULL CHECK (status IN ('draft', 'confirmed', 'hidden')),
    fingerprint     text        CHECK (fingerprint <> ''),
    ai_metadata     jsonb       NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(ai_metadata) = 'object'),
    human_edited_at timestamptz,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX workspace_timeline_entries_fingerprint_uq
    ON workspace_timeline_entries (workspace_id, fingerprint)
    WHERE fingerprint IS NOT NULL;
CREATE INDEX workspace_timeline_entries_time_idx
    ON workspace_timeline_entries (workspace_id, occurred_at, id);

CREATE TABLE workspace_timeline_entry_evidence (
    entry_id    bigint NOT NULL REFERENCES workspace_timeline_entries (id) ON DELETE CASCADE,
    evidence_id bigint NOT NULL REFERENCES workspace_timeline_evidence (id) ON DELETE CASCADE,
    PRIMARY KEY (entry_id, evidence_id)
);
-- Cascading deletes of evidence (retention tombstones) look bindings up by evidence.
CREATE INDEX workspace_timeline_entry_evidence_evidence_idx
    ON workspace_timeline_entry_evidence (evidence_id);

-- One summary per workspace (§13). A source=human summary is never overwritten by AI.
CREATE TABLE workspace_timeline_summaries (
    workspace_id text        PRIMARY KEY CHECK (workspace_id <> ''),
    source       text        NOT NULL CHECK (source IN ('ai', 'human')),
    text         text        NOT NULL,
    updated_at   timestamptz NOT NULL DEFAULT now(),
    ai_metadata  jsonb       NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(ai_metadata) = 'object')
);
