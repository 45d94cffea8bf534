-- Issue #31, decisions D26: processor versions side by side. Every version of the
-- window processor that ever ran is a row of processor_versions; exactly one is
-- serving (the API, the page and the summary show its output), others are candidates
-- (running next to it, invisible to users) or retired (their outputs deleted).
-- Window geometry (seconds) and the code version are recorded when a version starts;
-- NULL for the default version until its windows role first starts.
CREATE TABLE processor_versions (
    name            text        PRIMARY KEY CHECK (name <> '' AND length(name) <= 32),
    state           text        NOT NULL CHECK (state IN ('serving', 'candidate', 'retired')),
    window_seconds  bigint      CHECK (window_seconds > 0),
    grace_seconds   bigint      CHECK (grace_seconds >= 0),
    code_version    text        NOT NULL DEFAULT '',
    groups          text[]      NOT NULL DEFAULT '{}',
    topics          text[]      NOT NULL DEFAULT '{}',
    start_from      timestamptz,
    -- A synthesis-only version runs no window processor: it synthesizes the windows
    -- this version closed, again, under the synthesis configured now.
    synthesis_of    text        CHECK (synthesis_of <> ''),
    created_at      timestamptz NOT NULL DEFAULT now(),
    promoted_at     timestamptz,
    retired_at      timestamptz
);
-- At most one serving version, enforced by the schema; promote swaps in one
-- transaction, so readers always see exactly one.
CREATE UNIQUE INDEX processor_versions_one_serving_uq ON processor_versions ((true)) WHERE state = 'serving';

INSERT INTO processor_versions (name, state, promoted_at) VALUES ('v1', 'serving', now());
-- Versions that already wrote window states (an earlier `larkline replay`) are
-- candidates: their windows stay theirs; their drafts were merged into the default
-- version's entries before this migration and stay there.
INSERT INTO processor_versions (name, state)
SELECT DISTINCT split_part(source_key, '/', 4), 'candidate'
  FROM workspace_timeline_sync_states
 WHERE source_type = 'lark_timeline_window' AND source_key LIKE 'chat/%/processor/%/window/%'
   AND split_part(source_key, '/', 4) <> 'v1'
ON CONFLICT DO NOTHING;

-- Entries and summaries carry the version that wrote them; '' is the workspace's own
-- (human-made, or human-edited: a human edit moves an entry out of its version), visible
-- whatever version serves. Existing AI entries no human touched move into the default
-- version; everything else is the workspace's.
ALTER TABLE workspace_timeline_entries
    ADD COLUMN processor_version text NOT NULL DEFAULT '' CHECK (length(processor_version) <= 32);
UPDATE workspace_timeline_entries SET processor_version = 'v1'
 WHERE source = 'ai' AND human_edited_at IS NULL;
-- Fingerprint dedup is per version: a candidate's draft never lands on the serving
-- version's entry.
DROP INDEX workspace_timeline_entries_fingerprint_uq;
CREATE UNIQUE INDEX workspace_timeline_entries_fingerprint_uq
    ON workspace_timeline_entries (workspace_id, processor_version, fingerprint)
    WHERE fingerprint IS NOT NULL;
CREATE INDEX workspace_timeline_entries_version_idx
    ON workspace_timeline_entries (processor_version, workspace_id)
    WHERE processor_version <> '';

ALTER TABLE workspace_timeline_summaries
    ADD COLUMN processor_version text NOT NULL DEFAULT '' CHECK (length(processor_version) <= 32);
UPDATE workspace_timeline_summaries SET processor_version = 'v1' WHERE source = 'ai';
ALTER TABLE workspace_timeline_summaries DROP CONSTRAINT workspace_timeline_summaries_pkey;
ALTER TABLE workspace_timeline_summaries ADD PRIMARY KEY (workspace_id, processor_version);
-- A version's row is AI-written, the workspace's ('') human-written.
ALTER TABLE workspace_timeline_summaries
    ADD CONSTRAINT workspace_timeline_summaries_version_source_check
    CHECK ((processor_version = '') = (source = 'human'));

-- A recall empties the AI summary of the versions whose drafts it withdrew, not every
-- version's: a candidate's draft withdrawn never touches what the serving version shows.
CREATE OR REPLACE FUNCTION larkline_recall_entries(ws text, ev_ids bigint[]) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    versions text[];
BEGIN
    WITH w AS (
        UPDATE workspace_timeline_entries e
           SET status = 'hidden', title = '', body = '', withdrawn_at = now(), updated_at = now()
         WHERE e.workspace_id = ws AND e.source = 'ai' AND e.status = 'draft' AND e.human_edited_at IS NULL
           AND e.id IN (SELECT b.entry_id FROM workspace_timeline_entry_evidence b WHERE b.evidence_id = ANY (ev_ids))
        RETURNING e.processor_version)
    SELECT array_agg(processor_version) INTO versions FROM w;

    UPDATE workspace_timeline_entries e
       SET needs_review_at = now()
     WHERE e.workspace_id = ws AND e.withdrawn_at IS NULL AND e.needs_review_at IS NULL
       AND e.id IN (SELECT b.entry_id FROM workspace_timeline_entry_evidence b WHERE b.evidence_id = ANY (ev_ids));

    IF versions IS NOT NULL THEN
        UPDATE workspace_timeline_summaries
           SET text = '', refresh_due_at = coalesce(refresh_due_at, now()), updated_at = now()
         WHERE workspace_id = ws AND source = 'ai' AND processor_version = ANY (versions);
    END IF;
    RETURN coalesce(cardinality(versions), 0);
END $$;
