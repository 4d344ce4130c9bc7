package upload

import (
	"context"
	"sync"
)

// LockUpload takes tusd's lock of upload id as a PATCH would; asked is
// closed when another holder-to-be asks for it.
func LockUpload(s *Server, id string) (unlock func(), asked <-chan struct{}, err error) {
	l, err := s.lock.NewLock(id)
	if err != nil {
		return nil, nil, err
	}
	ch := make(chan struct{})
	var once sync.Once
	if err := l.Lock(context.Background(), func() { once.Do(func() { close(ch) }) }); err != nil {
		return nil, nil, err
	}
	return func() { _ = l.Unlock() }, ch, nil
}
