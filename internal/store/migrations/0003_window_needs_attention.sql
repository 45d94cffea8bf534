-- A window whose evidence never reached the table ends in needs_attention (a terminal
-- state an operator can find), instead of leaving no row behind.
ALTER TABLE workspace_timeline_sync_states
    DROP CONSTRAINT workspace_timeline_sync_states_status_check;
ALTER TABLE workspace_timeline_sync_states
    ADD CONSTRAINT workspace_timeline_sync_states_status_check
    CHECK (status IN ('processing', 'completed', 'ignored', 'failed', 'needs_attention'));
CREATE INDEX workspace_timeline_sync_states_needs_attention_idx
    ON workspace_timeline_sync_states (workspace_id, updated_at)
    WHERE status = 'needs_attention';
