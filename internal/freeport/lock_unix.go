//go:build unix

package freeport

import (
	"errors"
	"os"
	"syscall"
)

// tryLock takes an exclusive lock on path without waiting. ok is false when
// another open file (this process's or another's) holds it.
func tryLock(path string) (f *os.File, ok bool, err error) {
	f, err = os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o666)
	if err != nil {
		return nil, false, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, false, nil
		}
		return nil, false, err
	}
	return f, true, nil
}

func unlock(f *os.File) error { return f.Close() } // closing drops the lock
