package deploy

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const (
	kustomizationFile  = "kubernetes/kustomization.yaml"
	serviceMonitorFile = "kubernetes/components/servicemonitor/servicemonitor.yaml"
	operationsDoc      = "../docs/operations.md"
)

// The Secret is created by hand, out of the kustomization; it needs the
// namespace, which the kustomization would create only later.
func TestKubernetesNamespaceBeforeSecret(t *testing.T) {
	t.Parallel()
	k := readYAMLDocs(t, kustomizationFile)[0]
	ns := readYAMLDocs(t, "kubernetes/namespace.yaml")[0]
	secret := readYAMLDocs(t, "kubernetes/secret.example.yaml")[0]
	if k["namespace"] != dig(ns, "metadata", "name") || dig(secret, "metadata", "namespace") != k["namespace"] {
		t.Errorf("namespace: kustomization %v, namespace.yaml %v, secret.example.yaml %v; want one namespace everywhere",
			k["namespace"], dig(ns, "metadata", "name"), dig(secret, "metadata", "namespace"))
	}
	doc, err := os.ReadFile(operationsDoc)
	if err != nil {
		t.Fatal(err)
	}
	// The documented steps, in the order they must run.
	steps := []string{
		"scripts/image",
		"kubectl apply -f deploy/kubernetes/namespace.yaml",
		"create secret generic parley-secrets",
		"kubectl apply -k deploy/kubernetes",
		"parley skills trust",
	}
	at := 0
	for _, s := range steps {
		i := strings.Index(string(doc[at:]), s)
		if i < 0 {
			t.Fatalf("docs/operations.md does not say %q after the steps before it (%v)", s, steps)
		}
		at += i + len(s)
	}
}

// kustomize builds deploy/kubernetes with components enabled, as an
// operator would by uncommenting them, with kubectl's built-in Kustomize.
func kustomize(t *testing.T, components ...string) map[string][]map[string]any {
	t.Helper()
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("SKIPPED: kubectl is not installed: the kustomization was checked by reading it, not built")
	}
	dir := filepath.Join(t.TempDir(), "kubernetes")
	if err := os.CopyFS(dir, os.DirFS("kubernetes")); err != nil {
		t.Fatal(err)
	}
	if len(components) > 0 {
		k, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		k = append(k, "components:\n"...)
		for _, c := range components {
			k = append(k, "  - components/"+c+"\n"...)
		}
		if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), k, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out, err := exec.Command(kubectl, "kustomize", dir).Output()
	if err != nil {
		t.Fatalf("kubectl kustomize with %v: %v", components, err)
	}
	p := filepath.Join(t.TempDir(), "built.yaml")
	if err := os.WriteFile(p, out, 0o644); err != nil {
		t.Fatal(err)
	}
	byKind := map[string][]map[string]any{}
	for _, d := range readYAMLDocs(t, p) {
		byKind[d["kind"].(string)] = append(byKind[d["kind"].(string)], d)
		if d["kind"] != "Namespace" && dig(d, "metadata", "namespace") != "parley" {
			t.Errorf("%s %v is built outside the parley namespace", d["kind"], dig(d, "metadata", "name"))
		}
	}
	return byKind
}

func kinds(docs map[string][]map[string]any) []string {
	var out []string
	for k := range docs {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// Every component is a Kustomize Component, and the kustomization's
// comment, which tells operators how to turn them on, names each one.
func TestKubernetesComponentsAreListed(t *testing.T) {
	t.Parallel()
	entries, err := os.ReadDir("kubernetes/components")
	if err != nil {
		t.Fatal(err)
	}
	k, err := os.ReadFile(kustomizationFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		c := readYAMLDocs(t, filepath.Join("kubernetes/components", e.Name(), "kustomization.yaml"))[0]
		if c["kind"] != "Component" || c["apiVersion"] != "kustomize.config.k8s.io/v1alpha1" {
			t.Errorf("components/%s is a %v %v, not a Kustomize Component", e.Name(), c["apiVersion"], c["kind"])
		}
		if !strings.Contains(string(k), "components/"+e.Name()) {
			t.Errorf("kustomization.yaml does not tell how to enable components/%s", e.Name())
		}
	}
	// Without the Prometheus Operator there is no ServiceMonitor kind:
	// nothing in the base may need it.
	for kind, docs := range kubeDocs(t) {
		for _, d := range docs {
			if strings.HasPrefix(fmt.Sprint(d["apiVersion"]), "monitoring.coreos.com/") {
				t.Errorf("the base kustomization has a %s, which needs the Prometheus Operator; make it a component", kind)
			}
		}
	}
}

func TestKubernetesKustomizeBuilds(t *testing.T) {
	t.Parallel()
	t.Run("base", func(t *testing.T) {
		docs := kustomize(t)
		want := []string{"ConfigMap", "Deployment", "HorizontalPodAutoscaler", "Namespace", "PersistentVolumeClaim", "PodDisruptionBudget", "Service"}
		if got := kinds(docs); !slices.Equal(got, want) {
			t.Errorf("kinds = %v; want %v (no ServiceMonitor: clusters without the Prometheus Operator)", got, want)
		}
		if m := fmt.Sprint(dig(docs["PersistentVolumeClaim"][0], "spec", "accessModes")); m != "[ReadWriteMany]" {
			t.Errorf("skills volume %s; want ReadWriteMany", m)
		}
		if img := dig(docs["Deployment"][0], "spec", "template", "spec", "containers", 0, "image"); img != imageName(t) {
			t.Errorf("image %v; want %s", img, imageName(t))
		}
	})
	t.Run("servicemonitor", func(t *testing.T) {
		docs := kustomize(t, "servicemonitor")
		if len(docs["ServiceMonitor"]) != 1 {
			t.Fatalf("kinds = %v; want a ServiceMonitor", kinds(docs))
		}
		sm, svc := docs["ServiceMonitor"][0], docs["Service"][0]
		if dig(sm, "spec", "endpoints", 0, "path") != "/metrics" || dig(sm, "spec", "endpoints", 0, "port") != dig(svc, "spec", "ports", 0, "name") {
			t.Errorf("ServiceMonitor endpoint %v does not scrape the Service's port at /metrics", dig(sm, "spec", "endpoints"))
		}
		for k, v := range dig(sm, "spec", "selector", "matchLabels").(map[string]any) {
			if dig(svc, "metadata", "labels", k) != v {
				t.Errorf("ServiceMonitor selects %s=%v; the Service is labelled %v", k, v, dig(svc, "metadata", "labels"))
			}
		}
	})
	t.Run("skills-rwo", func(t *testing.T) {
		docs := kustomize(t, "skills-rwo")
		dep := docs["Deployment"][0]
		if m := fmt.Sprint(dig(docs["PersistentVolumeClaim"][0], "spec", "accessModes")); m != "[ReadWriteOnce]" {
			t.Errorf("skills volume %s; want ReadWriteOnce", m)
		}
		if r := dig(dep, "spec", "replicas"); r != 1 {
			t.Errorf("replicas = %v; a ReadWriteOnce volume wants 1", r)
		}
		if s := dig(dep, "spec", "strategy"); fmt.Sprint(s) != "map[type:Recreate]" {
			t.Errorf("strategy = %v; want Recreate (the old pod releases the volume first)", s)
		}
		if len(docs["HorizontalPodAutoscaler"]) > 0 || len(docs["PodDisruptionBudget"]) > 0 {
			t.Errorf("kinds = %v; an HPA would add replicas, a PDB of 1 out of 1 would block drains", kinds(docs))
		}
	})
	t.Run("skills-emptydir", func(t *testing.T) {
		docs := kustomize(t, "skills-emptydir")
		if len(docs["PersistentVolumeClaim"]) > 0 {
			t.Errorf("kinds = %v; want no PersistentVolumeClaim", kinds(docs))
		}
		for _, v := range dig(docs["Deployment"][0], "spec", "template", "spec", "volumes").([]any) {
			if dig(v, "persistentVolumeClaim") != nil {
				t.Errorf("volume %v still claims a PersistentVolumeClaim", v)
			}
			if dig(v, "name") == "skills" && dig(v, "emptyDir") == nil {
				t.Errorf("volume skills = %v; want an emptyDir", v)
			}
		}
	})
}

// imageName is the image the manifests run: images[0] of the kustomization.
func imageName(t *testing.T) string {
	t.Helper()
	k := readYAMLDocs(t, kustomizationFile)[0]
	return fmt.Sprintf("%v:%v", dig(k, "images", 0, "newName"), dig(k, "images", 0, "newTag"))
}

// scripts/image builds and pushes the image the manifests name. A fake
// docker on PATH records what it is asked to do.
func TestImageScriptBuildsAndPushesTheManifestsImage(t *testing.T) {
	t.Parallel()
	bin := t.TempDir()
	calls := filepath.Join(t.TempDir(), "calls")
	fake := "#!/bin/sh\necho \"$*\" >> " + calls + "\n"
	if err := os.WriteFile(filepath.Join(bin, "docker"), []byte(fake), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("../scripts/image")
	cmd.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"), "VERSION=v1.2.3")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("scripts/image: %v\n%s", err, out)
	}
	got, err := os.ReadFile(calls)
	if err != nil {
		t.Fatal(err)
	}
	name, _, _ := strings.Cut(imageName(t), ":")
	want := strings.Join([]string{
		"build --build-arg VERSION=v1.2.3 -t " + name + ":v1.2.3 -t " + imageName(t) + " .",
		"push " + name + ":v1.2.3",
		"push " + imageName(t),
	}, "\n") + "\n"
	if string(got) != want {
		t.Errorf("docker was asked:\n%s\nwant:\n%s", got, want)
	}
}
