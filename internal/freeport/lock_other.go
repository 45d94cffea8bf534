//go:build !unix

package freeport

import "os"

// tryLock without flock: exclusive creation, removed on unlock. A process that
// dies leaves its files behind; the listen check still passes over busy ports.
func tryLock(path string) (*os.File, bool, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o666)
	if os.IsExist(err) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	return f, true, nil
}

func unlock(f *os.File) error {
	err := f.Close()
	_ = os.Remove(f.Name())
	return err
}
