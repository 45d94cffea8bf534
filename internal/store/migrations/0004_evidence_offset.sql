-- The evidence-topic offset of the record that first carried each message, written by
-- the evidence sink when it inserts the row and kept through later versions. A closed
-- window (record version 3) names its evidence as the offsets below an end offset of
-- its chat's partition; synthesis reads exactly those messages, not ones that arrived
-- after the window closed. NULL for rows written before this migration or outside the
-- sink (read as part of every window).
ALTER TABLE workspace_timeline_evidence
    ADD COLUMN evidence_offset bigint CHECK (evidence_offset >= 0);
