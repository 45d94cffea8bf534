-- Every workspace that holds a Lark message (issue #29): a recall is applied in each
-- of them, eligible or not, so the event path and reconciliation look a message up
-- by its source_key across workspaces. One index probe per recall.
CREATE INDEX workspace_timeline_evidence_message_idx
    ON workspace_timeline_evidence (source_key)
    WHERE chat_id IS NOT NULL;
