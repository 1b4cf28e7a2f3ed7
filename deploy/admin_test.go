package deploy

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// The console listens on loopback by default, which inside a container
// or a pod no operator can reach: compose publishes it on the host's
// loopback with the token from .env, and Kubernetes reaches it by
// port-forward or, with components/admin, through a ClusterIP Service of
// its own — never through the public webhook port.
func TestAdminConsoleReachableInComposeAndKubernetes(t *testing.T) {
	t.Parallel()
	parley := dig(readYAMLDocs(t, "compose.yaml")[0], "services", "parley")
	if listen := dig(parley, "environment", "PARLEY_ADMIN_LISTEN"); listen != "0.0.0.0:8081" {
		t.Errorf("compose PARLEY_ADMIN_LISTEN = %v; want 0.0.0.0:8081 inside the container", listen)
	}
	var published []string
	for _, p := range dig(parley, "ports").([]any) {
		if s := fmt.Sprint(p); strings.HasSuffix(s, ":8081") {
			published = append(published, s)
		}
	}
	if len(published) != 1 || published[0] != "127.0.0.1:8081:8081" {
		t.Errorf("compose publishes the console as %q; want only 127.0.0.1:8081:8081 (the host's loopback)", published)
	}
	for _, f := range []string{".env.example", "kubernetes/secret.example.yaml"} {
		if b, err := os.ReadFile(f); err != nil || !strings.Contains(string(b), "PARLEY_ADMIN_TOKEN") {
			t.Errorf("%s does not name PARLEY_ADMIN_TOKEN (%v)", f, err)
		}
	}
	doc, err := os.ReadFile(operationsDoc)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(doc), "port-forward deploy/parley 8081") || !strings.Contains(string(doc), "components/admin") {
		t.Error("docs/operations.md does not say how to reach the console on Kubernetes (port-forward, components/admin)")
	}
	for _, s := range kubeDocs(t)["Service"] {
		if strings.Contains(fmt.Sprint(dig(s, "spec", "ports")), "8081") {
			t.Errorf("the base kustomization's Service %v exposes the console; only components/admin may", dig(s, "metadata", "name"))
		}
	}

	built := kustomize(t, "admin")
	var admin map[string]any
	for _, s := range built["Service"] {
		if dig(s, "metadata", "name") == "parley-admin" {
			admin = s
		}
	}
	if admin == nil || dig(admin, "spec", "type") != "ClusterIP" || !strings.Contains(fmt.Sprint(dig(admin, "spec", "ports")), "targetPort:admin") {
		t.Fatalf("components/admin builds no ClusterIP Service parley-admin targeting the admin port: %v", admin)
	}
	c := dig(built["Deployment"][0], "spec", "template", "spec", "containers").([]any)[0]
	env, ports := fmt.Sprint(dig(c, "env")), fmt.Sprint(dig(c, "ports"))
	if !strings.Contains(env, "name:PARLEY_ADMIN_LISTEN value:0.0.0.0:8081") || !strings.Contains(ports, "containerPort:8081") || !strings.Contains(ports, "containerPort:8080") {
		t.Errorf("components/admin's pod: env %s, ports %s; want the console on 0.0.0.0:8081 beside the webhook port", env, ports)
	}
}
