package windows

import (
	"fmt"
	"log/slog"

	"github.com/lovoo/goka"
)

// gokaLogger routes Goka's and sarama's printf-style logging into slog at debug level.
type gokaLogger struct{ l *slog.Logger }

// GokaLogger adapts l to goka.Logger (use with goka.WithLogger).
func GokaLogger(l *slog.Logger) goka.Logger {
	if l == nil {
		l = slog.New(slog.DiscardHandler)
	}
	return gokaLogger{l: l.With("component", "goka")}
}

func (g gokaLogger) Print(v ...any)                 { g.l.Debug(fmt.Sprint(v...)) }
func (g gokaLogger) Println(v ...any)               { g.l.Debug(fmt.Sprint(v...)) }
func (g gokaLogger) Printf(format string, v ...any) { g.l.Debug(fmt.Sprintf(format, v...)) }
