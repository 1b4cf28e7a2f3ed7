package mcp

import (
	"bufio"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// maxFrame bounds one JSON-RPC message from a stdio server: results are cut
// to maxResult anyway, and a server that writes a line without end must not
// make Parley buffer it all. A longer message breaks the connection, and
// the server is restarted.
const maxFrame = 8 << 20

// inheritedEnv are the only variables of Parley's environment a stdio server
// gets besides its configured env: enough to find and run a program (npx
// needs HOME and PATH) and to reach the network through a proxy, and none
// of Parley's own secrets (model keys, platform tokens).
var inheritedEnv = []string{
	"HOME", "LOGNAME", "USER", "PATH", "SHELL", "TERM", "TMPDIR", "TZ", "LANG", "LC_ALL",
	"HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy",
}

// stderr logging bounds: a server may write as much as it likes; Parley
// reads all of it (so the server never blocks on a full pipe) and logs at
// most stderrBurst lines per stderrWindow, each cut to stderrLine bytes.
const (
	stderrLine   = 1024
	stderrBurst  = 20
	stderrWindow = 10 * time.Second
)

// process is a running stdio server. Its pipes are plain os.Pipes that
// Parley owns, so that nothing in os/exec waits on them, and it runs in its
// own process group, so that stopping it also stops what it started (npx
// starts node, which would otherwise keep running and keep the pipes open).
type process struct {
	cmd    *exec.Cmd
	stdin  *os.File
	stdout *os.File
	stderr *os.File
	grace  time.Duration

	exited   chan struct{} // closed when the process has exited
	waitErr  error         // set before exited is closed
	signaled bool          // stop sent a signal (set inside stopOnce)
	drained  chan struct{} // closed when the stderr reader has returned
	stopOnce sync.Once

	mu         sync.Mutex
	lastStderr string
}

// startProcess starts cfg's command. getenv resolves ${NAME} in env; every
// expanded value goes to secret.
func startProcess(cfg ServerConfig, getenv func(string) string, secret func(string), grace time.Duration, log *slog.Logger) (*process, error) {
	env, err := expandMap(cfg.Env, "env", getenv, secret)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(cfg.Command, cfg.Args...)
	cmd.Dir = cfg.Cwd
	cmd.Env = childEnv(getenv, env)
	setProcessGroup(cmd)

	var files []*os.File // every end, closed on failure
	pipe := func() (r, w *os.File, err error) {
		r, w, err = os.Pipe()
		if err == nil {
			files = append(files, r, w)
		}
		return r, w, err
	}
	closeAll := func() {
		for _, f := range files {
			f.Close()
		}
	}
	inR, inW, err := pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := pipe()
	if err != nil {
		closeAll()
		return nil, err
	}
	errR, errW, err := pipe()
	if err != nil {
		closeAll()
		return nil, err
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	if err := cmd.Start(); err != nil {
		closeAll()
		return nil, fmt.Errorf("starting %s: %w", cfg.Command, err)
	}
	// The child has its copies; Parley keeps only its own ends, so that
	// reads see EOF once the child (and everything it started) is gone.
	inR.Close()
	outW.Close()
	errW.Close()

	p := &process{
		cmd: cmd, stdin: inW, stdout: outR, stderr: errR, grace: grace,
		exited: make(chan struct{}), drained: make(chan struct{}),
	}
	go func() {
		p.waitErr = cmd.Wait()
		close(p.exited)
	}()
	go p.readStderr(log)
	return p, nil
}

// childEnv is the inherited variables plus the configured ones.
func childEnv(getenv func(string) string, configured map[string]string) []string {
	var env []string
	for _, k := range inheritedEnv {
		if _, ok := configured[k]; ok {
			continue
		}
		if v := getenv(k); v != "" {
			env = append(env, k+"="+v)
		}
	}
	for k, v := range configured {
		env = append(env, k+"="+v)
	}
	return env
}

// readStderr logs what the server writes to stderr, rate-limited, and
// remembers the last line for the error shown when the server exits.
func (p *process) readStderr(log *slog.Logger) {
	defer close(p.drained)
	r := bufio.NewReaderSize(p.stderr, stderrLine)
	var windowStart time.Time
	logged, suppressed := 0, 0
	for {
		line, isPrefix, err := r.ReadLine()
		if len(line) > 0 {
			text := strings.ToValidUTF8(string(line), "?")
			p.mu.Lock()
			p.lastStderr = text
			p.mu.Unlock()
			if now := time.Now(); now.Sub(windowStart) > stderrWindow {
				if suppressed > 0 {
					log.Info("mcp: stderr lines not logged", "lines", suppressed)
				}
				windowStart, logged, suppressed = now, 0, 0
			}
			if logged < stderrBurst {
				log.Debug("mcp: stderr", "line", text)
				logged++
			} else {
				suppressed++
			}
		}
		// The rest of an over-long line is read and dropped.
		for isPrefix && err == nil {
			_, isPrefix, err = r.ReadLine()
		}
		if err != nil {
			return
		}
	}
}

// lastLine is the last line the server wrote to stderr, cut for an error
// message.
func (p *process) lastLine() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	const max = 200
	if len(p.lastStderr) > max {
		return strings.ToValidUTF8(p.lastStderr[:max], "") + "…"
	}
	return p.lastStderr
}

// exitError says how the process ended when that is news: killed by a
// signal Parley did not send, or a non-zero exit status before Parley sent
// any. It is nil when the process exited cleanly or because Parley stopped
// it, and must be called only after stop has returned.
func (p *process) exitError() error {
	ps := p.cmd.ProcessState
	if ps == nil {
		return nil
	}
	if sig, ok := exitSignal(ps); ok {
		if p.signaled && (sig == terminate || sig == kill) {
			return nil
		}
	} else if ps.ExitCode() == 0 || p.signaled {
		return nil
	}
	err := fmt.Errorf("exited: %s", ps)
	if line := p.lastLine(); line != "" {
		err = fmt.Errorf("%w; last stderr line: %q", err, line)
	}
	return err
}

// stop shuts the server down the way the MCP specification asks: close its
// stdin, wait, SIGTERM, wait, SIGKILL. Whatever else is left in its process
// group is killed, and Parley's ends of the pipes are closed, so no reader
// stays blocked. It is idempotent and returns once the process is gone.
func (p *process) stop() {
	p.stopOnce.Do(func() {
		p.stdin.Close()
		if !p.waitExit(p.grace) {
			p.signaled = true
			signalGroup(p.cmd, terminate)
			if !p.waitExit(p.grace) {
				signalGroup(p.cmd, kill)
				<-p.exited
			}
		}
		// Whatever the server started and left behind.
		signalGroup(p.cmd, kill)
		p.stdout.Close()
		p.stderr.Close()
		<-p.drained
	})
}

func (p *process) waitExit(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-p.exited:
		return true
	case <-t.C:
		return false
	}
}

// transport is the SDK transport over the process's pipes. Closing it (the
// SDK does when the session closes) stops the process.
func (p *process) transport() sdk.Transport {
	return &sdk.IOTransport{
		Reader:        stdoutReader{p},
		Writer:        stdinWriter{p},
		MaxLineLength: maxFrame,
	}
}

type stdoutReader struct{ p *process }

func (r stdoutReader) Read(b []byte) (int, error) { return r.p.stdout.Read(b) }
func (r stdoutReader) Close() error               { r.p.stop(); return nil }

type stdinWriter struct{ p *process }

func (w stdinWriter) Write(b []byte) (int, error) { return w.p.stdin.Write(b) }
func (w stdinWriter) Close() error                { w.p.stop(); return nil }

var (
	_ io.ReadCloser  = stdoutReader{}
	_ io.WriteCloser = stdinWriter{}
)
