package synth

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"

	"github.com/larkline/larkline/schemas/ids"
)

// FingerprintVersion prefixes every fingerprint; a change of the scheme changes it so
// old and new keys never collide.
const FingerprintVersion = "fp1"

// Fingerprint is the deduplication key of a draft (the first deduplication layer of
// §12.4; the entries table has a unique index on (workspace_id, fingerprint)).
//
// It is "fp1:" followed by 32 hex digits of SHA-256 over the workspace id, the kind and
// the anchor: the lowest evidence id the draft cites. The choice, and what it buys:
//
//   - Re-synthesizing the same window (a retried chunk, a worker that crashed before
//     advancing the cursor) gives the same fingerprints, so the unique index turns the
//     repeat into an update or a no-op. Evidence ids identify evidence rows, and a
//     window's rows do not change between attempts.
//   - The title is not hashed: a model words the same fact differently from one call
//     to the next, and a fingerprint that moved with wording would duplicate entries.
//   - Only the anchor, not the whole evidence set, is hashed: a repeat that cites one
//     supporting message more or less still lands on the same entry, and the extra
//     evidence is bound to it as supporting evidence.
//   - Two drafts of one kind anchored on the same message are treated as the same fact.
//     The rule-based synthesizer never produces that (a message belongs to one group and
//     it emits one draft per group and kind); for a model it is the desired merge.
//   - Entries of different windows never collide: their evidence is disjoint.
//
// The order of EvidenceIDs does not matter. A draft without evidence (which [Validate]
// rejects) gets the anchor 0.
func Fingerprint(ws ids.WorkspaceID, d Draft) string {
	var anchor int64
	for i, id := range d.EvidenceIDs {
		if i == 0 || id < anchor {
			anchor = id
		}
	}
	h := sha256.New()
	h.Write([]byte(ws))
	h.Write([]byte{0})
	h.Write([]byte(d.Kind))
	h.Write([]byte{0})
	h.Write([]byte(strconv.FormatInt(anchor, 10)))
	sum := h.Sum(nil)
	return FingerprintVersion + ":" + hex.EncodeToString(sum[:16])
}
