package httpapi

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/larkline/larkline/internal/store"
	"github.com/larkline/larkline/schemas/ids"
)

// An evidence page cursor is opaque to clients: base64url (no padding) of
//
//	version (1 byte, 1) | occurred_at unix microseconds (8 bytes, big-endian) |
//	id (8 bytes, big-endian) | MAC (16 bytes)
//
// where MAC is the first 16 bytes of HMAC-SHA256(key, domain | version | workspace |
// source | source_type | position). The MAC binds the position to the workspace and
// evidence kind it was issued for, so a cursor edited by hand, cut short, or taken from
// another workspace is rejected (400 invalid_cursor) instead of silently paging from
// an arbitrary position. A new encoding gets a new version byte.
const (
	cursorVersion    = 1
	cursorMACLen     = 16
	cursorPayloadLen = 1 + 8 + 8
	cursorLen        = cursorPayloadLen + cursorMACLen
	cursorDomain     = "larkline/httpapi/evidence-cursor"
	minCursorKeyLen  = 16
)

// errInvalidCursor is returned (wrapped) for a cursor that does not decode.
var errInvalidCursor = errors.New("invalid cursor")

type cursorCodec struct {
	key []byte
}

func newCursorCodec(key []byte) (cursorCodec, error) {
	if len(key) == 0 {
		return cursorCodec{}, fmt.Errorf("%w: CursorKey is required (a secret of at least %d bytes, the same on every replica)", ErrInvalidOptions, minCursorKeyLen)
	}
	if len(key) < minCursorKeyLen {
		return cursorCodec{}, fmt.Errorf("%w: CursorKey has %d bytes, needs at least %d", ErrInvalidOptions, len(key), minCursorKeyLen)
	}
	return cursorCodec{key: append([]byte(nil), key...)}, nil
}

func (c cursorCodec) mac(ws ids.WorkspaceID, kind store.EvidenceKind, payload []byte) []byte {
	m := hmac.New(sha256.New, c.key)
	for _, part := range []string{cursorDomain, string(ws), kind.Source, kind.SourceType} {
		// Length-prefix every part so that no two inputs share an encoding.
		var n [4]byte
		binary.BigEndian.PutUint32(n[:], uint32(len(part)))
		m.Write(n[:])
		m.Write([]byte(part))
	}
	m.Write(payload)
	return m.Sum(nil)[:cursorMACLen]
}

func (c cursorCodec) encode(ws ids.WorkspaceID, kind store.EvidenceKind, cur store.Cursor) string {
	buf := make([]byte, cursorPayloadLen, cursorLen)
	buf[0] = cursorVersion
	binary.BigEndian.PutUint64(buf[1:9], uint64(cur.OccurredAt.UnixMicro()))
	binary.BigEndian.PutUint64(buf[9:17], uint64(cur.ID))
	buf = append(buf, c.mac(ws, kind, buf)...)
	return base64.RawURLEncoding.EncodeToString(buf)
}

func (c cursorCodec) decode(ws ids.WorkspaceID, kind store.EvidenceKind, s string) (store.Cursor, error) {
	if len(s) != base64.RawURLEncoding.EncodedLen(cursorLen) {
		return store.Cursor{}, fmt.Errorf("%w: wrong length", errInvalidCursor)
	}
	buf, err := base64.RawURLEncoding.Strict().DecodeString(s)
	if err != nil || len(buf) != cursorLen {
		return store.Cursor{}, fmt.Errorf("%w: not base64url", errInvalidCursor)
	}
	if buf[0] != cursorVersion {
		return store.Cursor{}, fmt.Errorf("%w: unknown version %d", errInvalidCursor, buf[0])
	}
	if !hmac.Equal(buf[cursorPayloadLen:], c.mac(ws, kind, buf[:cursorPayloadLen])) {
		return store.Cursor{}, fmt.Errorf("%w: authentication failed", errInvalidCursor)
	}
	micros := int64(binary.BigEndian.Uint64(buf[1:9]))
	id := int64(binary.BigEndian.Uint64(buf[9:17]))
	if id < 0 {
		return store.Cursor{}, fmt.Errorf("%w: negative id", errInvalidCursor)
	}
	return store.Cursor{OccurredAt: time.UnixMicro(micros).UTC(), ID: id}, nil
}
