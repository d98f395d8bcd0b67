package argoresults

import (
	"encoding/base64"
	"path/filepath"
	"testing"
)

func base64URL(text string) string { return base64.RawURLEncoding.EncodeToString([]byte(text)) }

func TestATokensNamespaceIsReadFromItsKubernetesClaim(t *testing.T) {
	for _, c := range []struct {
		name, token, namespace string
	}{
		{"a pod token", "a." + base64URL(`{"kubernetes.io":{"namespace":"argo"}}`) + ".c", "argo"},
		{"not a JWT", "not-a-jwt", ""},
		{"a payload that is not base64url", "a.%%%.c", ""},
		{"a payload that is not JSON", "a." + base64URL(`{"kubernetes.io"`) + ".c", ""},
		{"no kubernetes.io claim", "a." + base64URL(`{"sub":"x"}`) + ".c", ""},
		{"an empty namespace", "a." + base64URL(`{"kubernetes.io":{"namespace":""}}`) + ".c", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			namespace, ok := TokenNamespace(c.token)
			if namespace != c.namespace || ok != (c.namespace != "") {
				t.Errorf("%q names namespace %q (%v), want %q", c.token, namespace, ok, c.namespace)
			}
		})
	}
}

// The kubelet rotates a projected token in place: the file is read at each call, trimmed.
func TestATokenFileIsReadAtEachCall(t *testing.T) {
	path := filepath.Join(t.TempDir(), "token")
	source := TokenFile(path)
	if _, err := source(); err == nil {
		t.Error("a token file that is not there was read")
	}
	for _, token := range []string{"first", "second"} {
		if err := writeFile(path, token+"\n"); err != nil {
			t.Fatal(err)
		}
		if got, err := source(); got != token || err != nil {
			t.Errorf("read %q, %v; want %q", got, err, token)
		}
	}
	if got, err := StaticToken("fixed")(); got != "fixed" || err != nil {
		t.Errorf("a static token: %q, %v", got, err)
	}
}
