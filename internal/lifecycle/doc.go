// Package lifecycle is the one contract of larkline's long-running parts: Run(ctx)
// runs until ctx ends or Close is called, and drains before it returns; Close stops
// a running Run, waits for it and for the calls it must wait for, and is idempotent.
//
// A part holds one [State] and starts Run with one call:
//
//	ctx, end, err := p.life.Begin(ctx)
//	if err != nil {
//		return err
//	}
//	defer end()
//
// Other calls Close must wait for (a RunOnce, a Refresh) use [State.Enter] the same
// way. [State.Close] marks the part closed, ends the context of Run and of every
// entered call, and waits until each has called its end. [ErrAlreadyRunning] is the
// sentinel every part returns (wrapped with its name) for a second Run its rule
// refuses; after Close, Begin and Enter return the part's own closed sentinel.
//
// A State owns its mutex. A part must not hold a lock of its own while it calls
// Close if its Run takes that lock before end, and must not call Close from Run.
//
// Bounds: one goroutine-free context per Run or entered call; no I/O.
package lifecycle
