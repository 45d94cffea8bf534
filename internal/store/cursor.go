package store

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Cursor is a keyset position in (occurred_at, id) order: the last row a caller has
// seen. Rows with equal occurred_at are ordered by id, so paging is stable even when
// many rows share a timestamp. Postgres keeps microseconds; cursors taken from rows the
// store returned are exact.
type Cursor struct {
	OccurredAt time.Time `json:"occurred_at"`
	ID         int64     `json:"id"`
}

// Less reports whether c sorts before o.
func (c Cursor) Less(o Cursor) bool {
	if !c.OccurredAt.Equal(o.OccurredAt) {
		return c.OccurredAt.Before(o.OccurredAt)
	}
	return c.ID < o.ID
}

// String encodes the cursor as "<unix microseconds>:<id>", the form stored in
// last_seen_cursor and suitable as an opaque page token.
func (c Cursor) String() string {
	return strconv.FormatInt(c.OccurredAt.UnixMicro(), 10) + ":" + strconv.FormatInt(c.ID, 10)
}

// ParseCursor decodes Cursor.String. The error wraps ErrInvalid.
func ParseCursor(s string) (Cursor, error) {
	us, id, ok := strings.Cut(s, ":")
	if !ok {
		return Cursor{}, fmt.Errorf("%w: cursor %q is not <unix micros>:<id>", ErrInvalid, s)
	}
	micros, err := strconv.ParseInt(us, 10, 64)
	if err != nil {
		return Cursor{}, fmt.Errorf("%w: cursor %q: time: %w", ErrInvalid, s, err)
	}
	n, err := strconv.ParseInt(id, 10, 64)
	if err != nil || n < 0 {
		return Cursor{}, fmt.Errorf("%w: cursor %q: id is not a non-negative integer", ErrInvalid, s)
	}
	return Cursor{OccurredAt: time.UnixMicro(micros).UTC(), ID: n}, nil
}

// Page bounds. A limit above MaxPageSize is lowered to it; a limit below 1 is invalid.
const MaxPageSize = 1000

func pageLimit(limit int) (int, error) {
	if limit < 1 {
		return 0, fmt.Errorf("%w: page limit %d < 1", ErrInvalid, limit)
	}
	return min(limit, MaxPageSize), nil
}
