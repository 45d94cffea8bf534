// Package lifecycle is the one rule of larkline's long-running parts for when Run may
// be called: [State] answers "may Run start?" and "is this the first Close?", and
// [ErrAlreadyRunning] is the sentinel every part returns (wrapped with its name) for a
// second Run its rule refuses. A Run after Close returns the part's own closed
// sentinel, which its other methods return too.
//
// A State holds no lock of its own: its owner calls it under the mutex that already
// guards the rest of its run state (the client it builds, the cancel func Close
// calls), so deciding and acting stay one critical section, as they were when each
// part wrote the switch out itself.
//
// Bounds: no goroutines, no I/O, no allocation beyond the wrapped error.
package lifecycle
