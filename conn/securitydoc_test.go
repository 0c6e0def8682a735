package conn

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestSecurityTable_NamesExistingTests keeps docs/rfc-notes/security.md
// honest: every test or fuzzer it names exists in the test file named
// before it (for a subtest, its name is in that file as a string), so a
// row cannot cite a test that was renamed or never written.
func TestSecurityTable_NamesExistingTests(t *testing.T) {
	doc, err := os.ReadFile("../docs/rfc-notes/security.md")
	if err != nil {
		t.Fatal(err)
	}
	token := regexp.MustCompile("`([^`]+)`")
	fileRef := regexp.MustCompile(`^[a-z0-9_/-]+_test\.go$`)
	testRef := regexp.MustCompile(`^((?:Test|Fuzz)[A-Za-z0-9_]+)(?:/(.+))?$`)
	sources := map[string]string{}
	var file string
	checked := 0
	for i, line := range strings.Split(string(doc), "\n") {
		for _, m := range token.FindAllStringSubmatch(line, -1) {
			tok := m[1]
			if fileRef.MatchString(tok) {
				file = tok
				if _, ok := sources[file]; !ok {
					b, err := os.ReadFile(filepath.Join("..", filepath.FromSlash(file)))
					if err != nil {
						t.Errorf("security.md line %d: %v", i+1, err)
					}
					sources[file] = string(b)
				}
				continue
			}
			tm := testRef.FindStringSubmatch(tok)
			if tm == nil {
				continue
			}
			checked++
			if file == "" {
				t.Errorf("security.md line %d: %s named before any test file", i+1, tok)
				continue
			}
			src := sources[file]
			if !strings.Contains(src, "func "+tm[1]+"(") {
				t.Errorf("security.md line %d: %s is not in %s", i+1, tm[1], file)
				continue
			}
			if sub := tm[2]; sub != "" && !strings.Contains(src, `"`+sub+`"`) {
				t.Errorf("security.md line %d: %s has no subtest %q in %s", i+1, tm[1], sub, file)
			}
		}
	}
	if checked < 100 {
		t.Errorf("only %d test names found in security.md", checked)
	}
	t.Logf("%d test names checked in %d files", checked, len(sources))
}
