package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/larkline/larkline/internal/store"
	"github.com/larkline/larkline/schemas"
)

// ErrStillRefused is returned (wrapped, with the reason) by Redrive when the record
// would be parked again: the cause was not fixed.
var ErrStillRefused = errors.New("the sink refuses the record again")

// Redrive feeds one evidence record, re-read from the evidence topic at the offset
// its dead letter names, through the sink's own decoding, checks and evidence rule
// (issue #19: `larkline deadletters redrive --stage sink`). It is
// idempotent: the store's version rule makes a record already applied, or older than
// the stored version, a no-op (unchanged, stale). It returns the store's outcome
// (inserted, updated, redacted, unchanged, stale, deleted, delete_absent); a record
// still refused returns ErrStillRefused and its reason; registry or database
// failures are returned as they are.
func Redrive(ctx context.Context, codec *schemas.Codec[schemas.EvidenceRecord], st Writer, rec *kgo.Record) (string, error) {
	if codec == nil || st == nil || rec == nil {
		return "", fmt.Errorf("%w: Redrive needs a codec, a store and a record", ErrInvalidOptions)
	}
	v, p, err := decodeRecord(ctx, codec, rec)
	if err != nil {
		return "", fmt.Errorf("decoding %s/%d@%d: %w", rec.Topic, rec.Partition, rec.Offset, err)
	}
	if p != nil {
		return p.reasonCode(), fmt.Errorf("%w (%s): %s/%d@%d: %w", ErrStillRefused, p.reasonCode(), rec.Topic, rec.Partition, rec.Offset, p.cause)
	}
	if v.tombstone {
		n, err := st.DeleteEvidence(ctx, v.ws, store.LarkMessageEvidence, []string{v.sourceKey})
		if err != nil {
			return "", fmt.Errorf("deleting %s: %w", v.key, err)
		}
		if n == 0 {
			return outcomeDeleteAbsent, nil
		}
		return outcomeDeleted, nil
	}
	outs, err := st.UpsertEvidence(ctx, []store.Evidence{v.row})
	switch {
	case err != nil && errors.Is(err, store.ErrInvalid):
		return ReasonStoreInvalid, fmt.Errorf("%w (%s): %s: %w", ErrStillRefused, ReasonStoreInvalid, v.key, err)
	case err != nil && classifyDB(err) == classData:
		return ReasonConstraint, fmt.Errorf("%w (%s): %s: %w", ErrStillRefused, ReasonConstraint, v.key, err)
	case err != nil:
		return "", fmt.Errorf("writing %s: %w", v.key, err)
	case len(outs) != 1:
		return "", fmt.Errorf("store reported %d outcomes for one row", len(outs))
	}
	return outs[0].Result.String(), nil
}
