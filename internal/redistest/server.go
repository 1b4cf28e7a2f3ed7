package redistest

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// startAttempts is how many ports a server is tried on before the test
// fails.
const startAttempts = 5

// startRedis starts redis-server with args(port) on a free port and
// returns its host:port once that very process answers; it is killed at
// cleanup. ports picks a port for each attempt.
//
// A port found free can be taken before redis-server binds it — by an
// outgoing connection (the kernel hands out the same range) or by another
// test's server — and a cluster node also needs port+10000 for its bus.
// redis-server then exits at once, while the address may well answer for
// the other owner. So readiness is the server's own process id in INFO,
// and a server that exited is started again on another port.
func startRedis(t testing.TB, bin string, args func(port int) []string, ports func() int) string {
	t.Helper()
	var last string
	for range startAttempts {
		port := ports()
		cmd := exec.Command(bin, args(port)...)
		if err := cmd.Start(); err != nil {
			t.Fatalf("redistest: start redis-server: %v", err)
		}
		exited := make(chan struct{})
		go func() {
			_ = cmd.Wait()
			close(exited)
		}()
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		if err := waitOwn(addr, cmd.Process.Pid, exited); err == nil {
			t.Cleanup(func() {
				_ = cmd.Process.Kill()
				<-exited
			})
			return addr
		} else {
			last = err.Error()
		}
		_ = cmd.Process.Kill()
		<-exited
	}
	t.Fatalf("redistest: redis-server did not start on any of %d free ports; last: %s", startAttempts, last)
	return ""
}

// waitOwn waits until the server at addr is the process pid, for up to
// 30 s (a loaded machine starts processes slowly); it gives up as soon as
// that process has exited.
func waitOwn(addr string, pid int, exited <-chan struct{}) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// Short timeouts: whoever else holds the port may accept and never answer.
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: time.Second, ReadTimeout: 200 * time.Millisecond})
	defer c.Close()
	want := "process_id:" + strconv.Itoa(pid) + "\r\n"
	for {
		select {
		case <-exited:
			return fmt.Errorf("redis-server on %s exited (its port was taken?)", addr)
		default:
		}
		info, err := c.Info(ctx, "server").Result()
		if err == nil && strings.Contains(info, want) {
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("redis-server on %s exited (its port was taken?)", addr)
		case <-ctx.Done():
			return fmt.Errorf("redis-server on %s did not answer within 30 s (last: %v)", addr, err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// freePorts picks free ports no higher than max.
func freePorts(t testing.TB, max int) func() int {
	return func() int {
		for {
			if port := freePort(t); port <= max {
				return port
			}
		}
	}
}
