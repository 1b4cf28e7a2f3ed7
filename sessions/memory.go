package sessions

import (
	"crypto/rand"
	"fmt"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// NewMemory returns a Store on an embedded, in-process Redis. It keeps
// everything in this process's memory: one replica only, and a restart
// forgets every conversation.
//
// The embedded server listens on a loopback port, which any local process
// (another container in the pod, a user on the host) can reach; so it asks
// for a password drawn at random here and known only to this process.
func NewMemory(opts Options) (*RedisStore, error) {
	srv := miniredis.NewMiniRedis()
	password := rand.Text()
	srv.RequireAuth(password)
	if err := srv.StartAddr("127.0.0.1:0"); err != nil {
		return nil, fmt.Errorf("sessions: start in-memory store: %w", err)
	}
	// The embedded server only expires keys when told time has passed, so
	// a ticker owned by the store moves its clock along with the real one.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		last := time.Now()
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case now := <-t.C:
				srv.FastForward(now.Sub(last))
				last = now
			}
		}
	}()
	client := redis.NewClient(&redis.Options{Addr: srv.Addr(), Password: password})
	s := NewRedis(client, opts)
	s.onStop = func() {
		close(stop)
		wg.Wait()
		srv.Close()
	}
	return s, nil
}
