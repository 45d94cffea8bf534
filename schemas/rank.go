package schemas

import "time"

// EvidenceRank orders the versions of one message's evidence the way the evidence
// table keeps them (internal/store's evidence version rule): a deleted version
// outranks every live one, and among versions that are both deleted or both live
// the later SourceUpdatedAt outranks the earlier. A version replaces the stored one
// when its content hash differs and its rank is not lower (Compare >= 0), so of two
// versions of equal rank the one that arrived later wins. Ranks are compared at
// millisecond precision, the precision the records carry.
type EvidenceRank struct {
	SourceUpdatedAt time.Time
	Deleted         bool
}

// Compare returns -1, 0 or +1 as r ranks below, equal to or above o.
func (r EvidenceRank) Compare(o EvidenceRank) int {
	switch {
	case r.Deleted != o.Deleted:
		if r.Deleted {
			return 1
		}
		return -1
	}
	a, b := r.SourceUpdatedAt.UnixMilli(), o.SourceUpdatedAt.UnixMilli()
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Replaces reports whether a version of rank r with content hash hash replaces a
// stored version of rank stored with content hash storedHash under the version
// rule: the hashes differ and r does not rank below stored.
func (r EvidenceRank) Replaces(hash string, stored EvidenceRank, storedHash string) bool {
	return hash != storedHash && r.Compare(stored) >= 0
}
