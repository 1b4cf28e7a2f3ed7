package bench

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"testing"
	"time"
)

// TestChildDiesWithTheBench kills a bench (this test binary, run again as
// one) with SIGKILL, which no deferred stop survives, and checks that the
// process it started dies with it: the child holds the write end of a
// pipe, so the read end sees EOF only once the bench and its child are
// both gone.
func TestChildDiesWithTheBench(t *testing.T) {
	t.Parallel()
	if os.Getenv("BENCH_CHILD_TEST") == "bench" {
		benchWithChild()
		return
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	bench := exec.Command(os.Args[0], "-test.run=^TestChildDiesWithTheBench$")
	bench.Env = append(os.Environ(), "BENCH_CHILD_TEST=bench")
	bench.ExtraFiles = []*os.File{w} // fd 3 in the bench, as flock's lock is
	out, err := bench.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := bench.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || line != "child started\n" {
		bench.Process.Kill()
		bench.Wait()
		t.Fatalf("bench said %q, %v", line, err)
	}
	bench.Process.Kill()
	bench.Wait()

	eof := make(chan error, 1)
	go func() {
		_, err := io.Copy(io.Discard, r)
		eof <- err
	}()
	select {
	case err := <-eof:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute): // the child sleeps for an hour: it was left running
		t.Fatal("the bench's child outlived it")
	}
}

// benchWithChild is the bench of TestChildDiesWithTheBench: it starts a
// child that would sleep for an hour, holding fd 3, and waits to be killed.
func benchWithChild() {
	cmd := child("sleep", "3600")
	cmd.ExtraFiles = []*os.File{os.NewFile(3, "pipe")}
	if err := cmd.Start(); err != nil {
		os.Exit(1)
	}
	os.Stdout.WriteString("child started\n")
	time.Sleep(time.Hour) // until the test kills it
}
