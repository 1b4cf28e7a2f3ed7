package deploy

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/parleyhq/parley/config"
	"github.com/parleyhq/parley/gateway"
	"github.com/parleyhq/parley/internal/parleybin"
	"github.com/parleyhq/parley/skills"
)

// The binary's contracts the deployment files lean on.
const listenPort = "8080"

// The port rule: the listen port is the mounted config file's listen: (or
// the binary's default in the bare image), never PARLEY_LISTEN, which
// would override the file without a word (variables win over the file).
// portOf is the port of a listen address.
func portOf(t *testing.T, listen string) string {
	t.Helper()
	_, port, err := net.SplitHostPort(listen)
	if err != nil {
		t.Fatalf("listen %q is not host:port", listen)
	}
	return port
}

// knownEnv is every variable the binary reads.
func knownEnv() map[string]bool {
	out := map[string]bool{}
	for _, v := range config.EnvVars() {
		out[v] = true
	}
	return out
}

func readYAMLDocs(t *testing.T, path string) []map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var docs []map[string]any
	dec := yaml.NewDecoder(bytes.NewReader(b))
	for {
		var d map[string]any
		err := dec.Decode(&d)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if d != nil {
			docs = append(docs, d)
		}
	}
	return docs
}

// dig walks nested maps and lists: dig(doc, "spec", "template", 0).
func dig(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				return nil
			}
			v = m[k]
		case int:
			l, ok := v.([]any)
			if !ok || k >= len(l) {
				return nil
			}
			v = l[k]
		}
	}
	return v
}

// checkConfig loads a parley.yaml as the binary would: unknown keys and bad
// values fail.
func checkConfig(t *testing.T, name, body string) config.Config {
	t.Helper()
	p := filepath.Join(t.TempDir(), "parley.yaml")
	os.WriteFile(p, []byte(body), 0o600)
	cfg, err := config.Load(p, func(string) string { return "" })
	if err != nil {
		t.Fatalf("%s is not a valid Parley config: %v", name, err)
	}
	return cfg
}

func TestComposeFile(t *testing.T) {
	t.Parallel()
	docs := readYAMLDocs(t, "compose.yaml")
	parley := dig(docs[0], "services", "parley")
	if parley == nil {
		t.Fatal("compose.yaml has no parley service")
	}
	env := knownEnv()
	for name := range dig(parley, "environment").(map[string]any) {
		if !env[name] {
			t.Errorf("compose parley.environment sets %s, which the binary does not read", name)
		}
	}
	if listen := dig(parley, "environment", "PARLEY_LISTEN"); listen != nil {
		t.Errorf("compose sets PARLEY_LISTEN=%v, which would override listen: of the mounted parley.yaml; set the port there", listen)
	}
	if ports := fmt.Sprint(dig(parley, "ports")); !strings.Contains(ports, ":"+listenPort) {
		t.Errorf("ports %s do not publish %s", ports, listenPort)
	}
	if hc := fmt.Sprint(dig(parley, "healthcheck", "test")); !strings.Contains(hc, "parley healthcheck") {
		t.Errorf("healthcheck %s does not use parley healthcheck", hc)
	}
	if ef := dig(parley, "env_file"); ef != ".env" {
		t.Errorf("env_file = %v; want the git-ignored .env", ef)
	}
	ignored, _ := os.ReadFile("../.gitignore")
	if !strings.Contains(string(ignored), "deploy/.env") {
		t.Error("deploy/.env is not git-ignored")
	}
	f, err := os.Open(".env.example")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, _, _ := strings.Cut(line, "=")
		if !env[name] {
			t.Errorf(".env.example names %s, which the binary does not read", name)
		}
		if name == "PARLEY_LISTEN" {
			t.Error(".env.example sets PARLEY_LISTEN, which would override listen: of the mounted parley.yaml")
		}
	}
	// Every mounted file or folder exists, and the config mounted is valid.
	for _, svc := range []string{"parley", "prometheus", "grafana"} {
		for _, v := range dig(docs[0], "services", svc, "volumes").([]any) {
			src, _, _ := strings.Cut(v.(string), ":")
			if strings.HasPrefix(src, ".") {
				if _, err := os.Stat(src); err != nil {
					t.Errorf("%s mounts %s, which does not exist", svc, src)
				}
			}
		}
	}
	body, _ := os.ReadFile("parley.yaml")
	cfg := checkConfig(t, "deploy/parley.yaml", string(body))
	if port := portOf(t, cfg.Listen); port != listenPort || !strings.Contains(fmt.Sprint(dig(parley, "ports")), ":"+port) {
		t.Errorf("deploy/parley.yaml listens on %s; compose publishes %v", cfg.Listen, dig(parley, "ports"))
	}
	if redis := fmt.Sprint(dig(docs[0], "services", "redis", "command")); !strings.Contains(redis, "--appendonly yes") {
		t.Errorf("redis runs without append-only persistence: %s", redis)
	}
}

// kubeDocs loads every resource the kustomization lists, by kind.
func kubeDocs(t *testing.T) map[string][]map[string]any {
	t.Helper()
	k := readYAMLDocs(t, "kubernetes/kustomization.yaml")[0]
	byKind := map[string][]map[string]any{}
	for _, r := range k["resources"].([]any) {
		for _, d := range readYAMLDocs(t, filepath.Join("kubernetes", r.(string))) {
			kind := d["kind"].(string)
			byKind[kind] = append(byKind[kind], d)
		}
	}
	return byKind
}

func TestKubernetesManifests(t *testing.T) {
	t.Parallel()
	docs := kubeDocs(t)
	for _, kind := range []string{"Namespace", "Deployment", "Service", "ConfigMap", "PodDisruptionBudget", "HorizontalPodAutoscaler", "PersistentVolumeClaim"} {
		if len(docs[kind]) == 0 {
			t.Errorf("kustomization has no %s", kind)
		}
	}
	dep := docs["Deployment"][0]
	if r := dig(dep, "spec", "replicas"); r != 2 {
		t.Errorf("replicas = %v; want 2", r)
	}
	c := dig(dep, "spec", "template", "spec", "containers", 0)
	env := knownEnv()
	for _, e := range dig(c, "env").([]any) {
		name := dig(e, "name").(string)
		if !env[name] {
			t.Errorf("deployment sets %s, which the binary does not read", name)
		}
		if name == "PARLEY_LISTEN" {
			t.Error("the deployment sets PARLEY_LISTEN, which would override listen: of the config map; set the port there")
		}
	}
	for probe, want := range map[string]string{"readinessProbe": "/readyz", "livenessProbe": "/healthz"} {
		if p := dig(c, probe, "httpGet", "path"); p != want {
			t.Errorf("%s path = %v; want %s", probe, p, want)
		}
		if p := dig(c, probe, "httpGet", "port"); p != dig(c, "ports", 0, "name") {
			t.Errorf("%s port %v is not the container's port", probe, p)
		}
	}
	if dig(c, "resources", "requests") == nil || dig(c, "resources", "limits") == nil {
		t.Error("container has no resource requests and limits")
	}
	if dig(c, "securityContext", "readOnlyRootFilesystem") != true || dig(dep, "spec", "template", "spec", "securityContext", "runAsNonRoot") != true {
		t.Error("container is not non-root with a read-only root filesystem")
	}
	// The config map is a valid config whose drain fits the grace period.
	var cfg config.Config
	for _, cm := range docs["ConfigMap"] {
		if body, ok := dig(cm, "data", "parley.yaml").(string); ok {
			cfg = checkConfig(t, "configmap parley.yaml", body)
		}
	}
	if port := fmt.Sprint(dig(c, "ports", 0, "containerPort")); port != listenPort || portOf(t, cfg.Listen) != port {
		t.Errorf("container port %s and the config map's listen %q disagree with %s", port, cfg.Listen, listenPort)
	}
	grace := time.Duration(dig(dep, "spec", "template", "spec", "terminationGracePeriodSeconds").(int)) * time.Second
	if grace <= gateway.SectionFrom(cfg).ShutdownTimeout {
		t.Errorf("terminationGracePeriodSeconds %v does not exceed gateway.shutdown_timeout %v", grace, gateway.SectionFrom(cfg).ShutdownTimeout)
	}
	// Workspace skills, mounted as the kubelet mounts them, load and lint
	// clean.
	root := t.TempDir()
	var want []string
	for _, cm := range docs["ConfigMap"] {
		if dig(cm, "metadata", "name") != "parley-workspace-skills" {
			continue
		}
		for key := range dig(cm, "data").(map[string]any) {
			want = append(want, strings.TrimSuffix(key, ".SKILL.md"))
		}
	}
	if len(want) == 0 {
		t.Fatal("no workspace skills ConfigMap")
	}
	mountConfigMaps(t, root, dep, docs["ConfigMap"])
	workspace := filepath.Join(root, "workspace")
	cat, err := skills.Load(skills.Layers{Workspace: workspace})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range want {
		if s, ok := cat.Get(name); !ok || s.Source != skills.SourceWorkspace {
			t.Errorf("workspace skill %s is not loaded from the ConfigMap as the pod mounts it (warnings: %v)", name, cat.Warnings())
		}
	}
	for _, w := range skills.Lint(skills.WorkspaceSkillsDir(workspace)) {
		t.Errorf("workspace skill: %s", w)
	}
	secret := readYAMLDocs(t, "kubernetes/secret.example.yaml")[0]
	for name := range dig(secret, "stringData").(map[string]any) {
		if !env[name] {
			t.Errorf("secret example names %s, which the binary does not read", name)
		}
	}
	if mode := fmt.Sprint(dig(docs["PersistentVolumeClaim"][0], "spec", "accessModes")); !strings.Contains(mode, "ReadWriteMany") {
		t.Errorf("the shared skills volume is %s; want ReadWriteMany", mode)
	}
}

// mountConfigMaps lays out under root what the container of dep sees of its
// ConfigMap volumes, as the kubelet lays them out: a volume mounted whole is
// a timestamped folder, a ..data symlink to it and one symlink per top-level
// entry (so that updates swap atomically); a subPath mount is the file
// itself, bind-mounted.
func mountConfigMaps(t *testing.T, root string, dep map[string]any, configMaps []map[string]any) {
	t.Helper()
	pod := dig(dep, "spec", "template", "spec")
	data := func(volume string) (files map[string]string, ok bool) {
		for _, v := range dig(pod, "volumes").([]any) {
			if dig(v, "name") != volume || dig(v, "configMap") == nil {
				continue
			}
			var cm map[string]any
			for _, c := range configMaps {
				if dig(c, "metadata", "name") == dig(v, "configMap", "name") {
					cm = c
				}
			}
			if cm == nil {
				t.Fatalf("volume %s names a ConfigMap the kustomization lacks", volume)
			}
			files = map[string]string{}
			items, _ := dig(v, "configMap", "items").([]any)
			for key, val := range dig(cm, "data").(map[string]any) {
				path := key
				if items != nil {
					path = ""
					for _, it := range items {
						if dig(it, "key") == key {
							path = dig(it, "path").(string)
						}
					}
					if path == "" {
						continue
					}
				}
				files[path] = val.(string)
			}
			return files, true
		}
		return nil, false
	}
	write := func(p, body string) {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, m := range dig(pod, "containers", 0, "volumeMounts").([]any) {
		files, ok := data(dig(m, "name").(string))
		if !ok {
			continue
		}
		target := filepath.Join(root, dig(m, "mountPath").(string))
		if sub, _ := dig(m, "subPath").(string); sub != "" {
			body, ok := files[sub]
			if !ok {
				t.Fatalf("volumeMount %s: subPath %s is not a key of its ConfigMap", target, sub)
			}
			write(target, body)
			continue
		}
		const stamp = "..2026_01_01_00_00_00.000000001"
		top := map[string]bool{}
		for path, body := range files {
			write(filepath.Join(target, stamp, path), body)
			top[strings.Split(path, "/")[0]] = true
		}
		if err := os.Symlink(stamp, filepath.Join(target, "..data")); err != nil {
			t.Fatal(err)
		}
		for name := range top {
			if err := os.Symlink(filepath.Join("..data", name), filepath.Join(target, name)); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestProbePathsExistInTheBinary runs the real binary and asks every path
// the deployment files probe or scrape.
func TestMain(m *testing.M) {
	code := m.Run()
	parleybin.Remove()
	os.Exit(code)
}

func TestProbePathsExistInTheBinary(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds the binary")
	}
	base := startServe(t, "REDIS_URL=")

	paths := []string{"/healthz", "/readyz"}
	docs := kubeDocs(t)
	c := dig(docs["Deployment"][0], "spec", "template", "spec", "containers", 0)
	for _, probe := range []string{"readinessProbe", "livenessProbe"} {
		paths = append(paths, dig(c, probe, "httpGet", "path").(string))
	}
	paths = append(paths, dig(readYAMLDocs(t, serviceMonitorFile)[0], "spec", "endpoints", 0, "path").(string))
	prom := readYAMLDocs(t, prometheusFile)[0]
	if mp, ok := dig(prom, "scrape_configs", 0, "metrics_path").(string); ok {
		paths = append(paths, mp)
	}
	slices.Sort(paths)
	for _, p := range slices.Compact(paths) {
		resp, err := http.Get(base + p)
		if err != nil {
			t.Fatalf("GET %s: %v", p, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s = %d; the deployment probes a path the binary does not serve", p, resp.StatusCode)
		}
	}
}

// TestEveryAlertIsDocumented keeps docs/operations.md's alert table in step
// with the rules: an operator paged by an alert must find what to do.
func TestEveryAlertIsDocumented(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	rules := readYAMLDocs(t, alertsFile)[0]
	for _, g := range rules["groups"].([]any) {
		for _, r := range dig(g, "rules").([]any) {
			name, _ := dig(r, "alert").(string)
			if name != "" && !strings.Contains(string(doc), "| "+name+" |") {
				t.Errorf("alert %s is not in the table of docs/operations.md", name)
			}
		}
	}
}

// TestDockerfile checks what the image promises against the binary: the
// build command stamps the version `parley version` prints and yields a
// static binary, the environment names variables the binary reads, the
// port is the one it listens on, and the health check is its own.
func TestDockerfile(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	df := string(b)
	env := knownEnv()
	var build string
	lines := strings.Split(strings.ReplaceAll(df, "\\\n", " "), "\n")
	for _, line := range lines {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		switch fields[0] {
		case "ENV":
			for _, f := range fields[1:] {
				name, _, ok := strings.Cut(f, "=")
				if ok && !env[name] {
					t.Errorf("Dockerfile sets %s, which the binary does not read", name)
				}
				if name == "PARLEY_LISTEN" {
					t.Error("the Dockerfile sets PARLEY_LISTEN, which would override listen: of a mounted config file")
				}
			}
		case "EXPOSE":
			if fields[1] != listenPort || portOf(t, config.DefaultListen) != listenPort {
				t.Errorf("EXPOSE %s; the binary listens on %s by default", fields[1], config.DefaultListen)
			}
		case "USER":
			if strings.HasPrefix(fields[1], "0") || fields[1] == "root" {
				t.Errorf("the image runs as %s", fields[1])
			}
		case "HEALTHCHECK":
			if !strings.Contains(line, `"healthcheck"`) {
				t.Errorf("HEALTHCHECK does not use parley healthcheck: %s", line)
			}
		case "RUN":
			if strings.Contains(line, "go build") {
				build = line
			}
		}
	}
	if build == "" || !strings.Contains(build, "CGO_ENABLED=0") || !strings.Contains(build, "-X main.version=${VERSION}") {
		t.Fatalf("the build command does not build a static, version-stamped binary: %s", build)
	}
	if testing.Short() {
		t.Skip("runs the binary")
	}
	for _, flag := range []string{"CGO_ENABLED=0", "-trimpath", `-ldflags "-s -w -X main.version=${VERSION}"`, "./cmd/parley"} {
		if !strings.Contains(build, flag) {
			t.Errorf("the Dockerfile's build line lacks %s: %s", flag, build)
		}
	}
	// The stamp lands where `parley version` reads it (the shared test
	// binary is stamped the same way).
	out, err := exec.Command(parleybin.Path(t), "version").Output()
	if err != nil || strings.TrimSpace(string(out)) != "parley "+parleybin.Version {
		t.Fatalf("parley version = %q, %v; want the stamped version %s", out, err, parleybin.Version)
	}
	// The distroless static image needs a binary without cgo: every
	// package the binary links must build with CGO_ENABLED=0. go list
	// answers that without compiling the tree a second time.
	list := exec.Command("go", "list", "-e", "-deps", "-f", "{{if .Error}}{{.ImportPath}}: {{.Error}}{{end}}{{if .CgoFiles}}{{.ImportPath}} uses cgo{{end}}", "../cmd/parley")
	list.Env = append(os.Environ(), "CGO_ENABLED=0")
	if problems, err := list.CombinedOutput(); err != nil || strings.TrimSpace(string(problems)) != "" {
		t.Errorf("with CGO_ENABLED=0 the binary does not build: %v\n%s", err, problems)
	}
}
