package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// clockTicks is USER_HZ, the unit of /proc's CPU times: 100 on every Linux
// the kernel ABI allows userland to see.
const clockTicks = 100

func readFile(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}

// pidTicks is a process's user+system CPU time so far, in clock ticks.
func pidTicks(pid int) (uint64, error) {
	return ParsePidStat(readFile(fmt.Sprintf("/proc/%d/stat", pid)))
}

func machineTimes() (CPUTimes, error) { return ParseProcStat(readFile("/proc/stat")) }

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// redisServer is the bench's own redis-server, append-only. fsync is its
// appendfsync: everysec, as deploy/compose.yaml and docs/operations.md
// run it, or always, so that no acknowledged write can be lost whatever
// happens, at the cost of a disk flush before every write's answer.
type redisServer struct {
	dir, port string
	fsync     string
	cmd       *exec.Cmd
	client    *redis.Client
}

func startRedis(ctx context.Context, dir, fsync string) (*redisServer, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	r := &redisServer{dir: dir, port: strconv.Itoa(port), fsync: fsync}
	if err := r.start(ctx); err != nil {
		return nil, err
	}
	r.client = redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + r.port})
	return r, nil
}

func (r *redisServer) URL() string { return "redis://127.0.0.1:" + r.port + "/0" }

func (r *redisServer) start(ctx context.Context) error {
	r.cmd = child("redis-server", "--port", r.port, "--bind", "127.0.0.1", "--dir", r.dir,
		"--save", "", "--appendonly", "yes", "--appendfsync", r.fsync, "--logfile", filepath.Join(r.dir, "redis.log"))
	if err := r.cmd.Start(); err != nil {
		return fmt.Errorf("redis-server: %w", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if c, err := net.DialTimeout("tcp", "127.0.0.1:"+r.port, time.Second); err == nil {
			c.Write([]byte("PING\r\n"))
			buf := make([]byte, 16)
			c.SetReadDeadline(time.Now().Add(time.Second))
			n, _ := c.Read(buf)
			c.Close()
			if bytes.HasPrefix(buf[:n], []byte("+PONG")) {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	return errors.New("redis-server did not answer within 10 s; see " + filepath.Join(r.dir, "redis.log"))
}

// kill stops redis-server with SIGKILL, as a crash would.
func (r *redisServer) kill() {
	r.cmd.Process.Kill()
	r.cmd.Wait()
}

func (r *redisServer) writes(ctx context.Context) (int64, error) {
	s, err := r.stats(ctx)
	return s.Writes, err
}

// stats reads Redis's round trips and commands so far, with one INFO: the
// next read counts that INFO as one of each.
func (r *redisServer) stats(ctx context.Context) (RedisStats, error) {
	info, err := r.client.Info(ctx, "stats").Result()
	if err != nil {
		return RedisStats{}, err
	}
	return ParseRedisStats(info)
}

func (r *redisServer) stop() {
	r.client.Close()
	r.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { r.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		r.kill()
	}
}

// parleyServer is `parley serve` pointed at the fakes and the bench's Redis.
type parleyServer struct {
	cmd  *exec.Cmd
	base string
	log  string
}

// extraEnv is added to parley's environment (e.g. PARLEY_PROFILE_DIR).
func startParley(ctx context.Context, bin, dir string, r *redisServer, model, slack *upstream, extraEnv []string) (*parleyServer, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	p := &parleyServer{base: "http://127.0.0.1:" + strconv.Itoa(port), log: filepath.Join(dir, "parley.log")}
	logf, err := os.Create(p.log)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	home := filepath.Join(dir, "home")
	if err := os.MkdirAll(home, 0o700); err != nil {
		return nil, err
	}
	p.cmd = child(bin, "serve")
	p.cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + home},
		"PARLEY_HOME="+home, "PARLEY_LISTEN=127.0.0.1:"+strconv.Itoa(port), "REDIS_URL="+r.URL(),
		"OPENAI_BASE_URL="+model.URL()+"/v1", "OPENAI_API_KEY=sk-bench",
		"SLACK_BOT_TOKEN="+botToken, "SLACK_SIGNING_SECRET="+signingSecret, "SLACK_API_URL="+slack.URL()+"/api/")
	p.cmd.Env = append(p.cmd.Env, extraEnv...)
	p.cmd.Stdout, p.cmd.Stderr = logf, logf
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("parley serve: %w", err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := http.Get(p.base + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p, nil
			}
		}
		select {
		case <-ctx.Done():
			p.stop()
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	p.stop()
	return nil, fmt.Errorf("parley serve not ready within 60 s; its log is %s", p.log)
}

func (p *parleyServer) pid() int { return p.cmd.Process.Pid }

// stopProfile ends the CPU profile begun with SIGUSR1 and waits for parley
// (built with -tags parleyprofile) to have written both profiles to dir.
func (p *parleyServer) stopProfile(dir string) error {
	p.cmd.Process.Signal(syscall.SIGUSR2)
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		_, err1 := os.Stat(filepath.Join(dir, "cpu.pprof"))
		_, err2 := os.Stat(filepath.Join(dir, "allocs.pprof"))
		if err1 == nil && err2 == nil {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("no profile in %s within 30 s: is %s built with -tags parleyprofile?", dir, p.cmd.Path)
}

func (p *parleyServer) stop() {
	p.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		p.cmd.Process.Kill()
		<-done
	}
}
