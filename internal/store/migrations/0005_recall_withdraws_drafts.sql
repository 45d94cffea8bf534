-- Issue #19 item 3, decisions D12: a recalled message takes the AI text derived from it
-- with it. When a Lark message's evidence row turns deleted by a recall (not by
-- retention, whose redacted version carries metadata "retention": true), in the same
-- statement, hence the same transaction, as the redaction:
--   * AI drafts no human touched (source ai, status draft, human_edited_at NULL) that
--     cite the row are withdrawn: status hidden, title and body emptied, withdrawn_at;
--   * every other entry citing it (human, confirmed, hidden, human-edited) keeps its
--     text and gets needs_review_at (kept from the first recall until a human edits it);
--   * when a draft was withdrawn, the workspace's AI summary (never a human one) loses
--     its text and gets refresh_due_at: the next completed window summarizes again,
--     changed or not, without the old text as its previous summary.
-- A trigger, not code in the sink: every writer of evidence (the sink's two upsert
-- paths, a dead-letter re-drive, an operator's SQL) gets it, atomically, so a crash
-- between the redaction and the withdrawal cannot happen and a redelivered recall has
-- nothing left to do.
ALTER TABLE workspace_timeline_entries
    ADD COLUMN withdrawn_at    timestamptz,
    ADD COLUMN needs_review_at timestamptz;
ALTER TABLE workspace_timeline_summaries
    ADD COLUMN refresh_due_at timestamptz;

-- Withdraws or flags the entries citing evidence ev_ids of workspace ws; returns how
-- many drafts it withdrew. Also called by the store when a draft binds evidence that is
-- already recalled (a synthesizer that read the message before the recall).
CREATE FUNCTION larkline_recall_entries(ws text, ev_ids bigint[]) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    withdrawn integer;
BEGIN
    UPDATE workspace_timeline_entries e
       SET status = 'hidden', title = '', body = '', withdrawn_at = now(), updated_at = now()
     WHERE e.workspace_id = ws AND e.source = 'ai' AND e.status = 'draft' AND e.human_edited_at IS NULL
       AND e.id IN (SELECT b.entry_id FROM workspace_timeline_entry_evidence b WHERE b.evidence_id = ANY (ev_ids));
    GET DIAGNOSTICS withdrawn = ROW_COUNT;

    UPDATE workspace_timeline_entries e
       SET needs_review_at = now()
     WHERE e.workspace_id = ws AND e.withdrawn_at IS NULL AND e.needs_review_at IS NULL
       AND e.id IN (SELECT b.entry_id FROM workspace_timeline_entry_evidence b WHERE b.evidence_id = ANY (ev_ids));

    IF withdrawn > 0 THEN
        UPDATE workspace_timeline_summaries
           SET text = '', refresh_due_at = coalesce(refresh_due_at, now()), updated_at = now()
         WHERE workspace_id = ws AND source = 'ai';
    END IF;
    RETURN withdrawn;
END $$;

CREATE FUNCTION larkline_evidence_recalled() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM larkline_recall_entries(NEW.workspace_id, ARRAY[NEW.id]);
    RETURN NULL;
END $$;

CREATE TRIGGER workspace_timeline_evidence_recalled
    AFTER UPDATE OF deleted ON workspace_timeline_evidence
    FOR EACH ROW
    WHEN (NEW.deleted AND NOT OLD.deleted AND NOT coalesce(NEW.metadata_json ? 'retention', false))
    EXECUTE FUNCTION larkline_evidence_recalled();
