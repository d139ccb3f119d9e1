// Command linkcheck checks the repository's Markdown links (make verify):
// every relative link names a file or folder that exists, and every
// #anchor a heading of its page, as GitHub renders it. Links to other
// sites are left alone (CI has no network).
//
//	linkcheck [ROOT]
package main

import (
	"bufio"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"unicode"
)

// link matches an inline Markdown link or image: [text](target "title").
var link = regexp.MustCompile(`!?\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)

// codeSpan is inline code, whose brackets are not links.
var codeSpan = regexp.MustCompile("`[^`]*`")

// heading is an ATX heading: one to six #, a space, the text.
var heading = regexp.MustCompile(`^#{1,6}\s+(.*?)\s*#*\s*$`)

// skipped are the folders not checked: build output and others' files.
var skipped = map[string]bool{".git": true, "bin": true, "dist": true, "node_modules": true, "vendor": true}

func main() {
	root := "."
	if len(os.Args) > 1 {
		root = os.Args[1]
	}
	problems, err := check(root)
	if err != nil {
		fmt.Fprintln(os.Stderr, "linkcheck:", err)
		os.Exit(2)
	}
	for _, p := range problems {
		fmt.Println(p)
	}
	if len(problems) > 0 {
		fmt.Printf("linkcheck: %d broken links\n", len(problems))
		os.Exit(1)
	}
}

// check returns every broken link of the Markdown files under root.
func check(root string) ([]string, error) {
	var pages []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && skipped[d.Name()] {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".md") {
			pages = append(pages, path)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	anchors := map[string]map[string]bool{}
	anchorsOf := func(page string) (map[string]bool, error) {
		if a, ok := anchors[page]; ok {
			return a, nil
		}
		a, err := headings(page)
		anchors[page] = a
		return a, err
	}
	var problems []string
	for _, page := range pages {
		raw, err := os.ReadFile(page)
		if err != nil {
			return nil, err
		}
		fenced := false
		for n, line := range strings.Split(string(raw), "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "```") {
				fenced = !fenced
			}
			if fenced {
				continue
			}
			for _, m := range link.FindAllStringSubmatch(codeSpan.ReplaceAllString(line, ""), -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				file, anchor, _ := strings.Cut(target, "#")
				dest := page
				if file != "" {
					dest = filepath.Join(filepath.Dir(page), file)
					if _, err := os.Stat(dest); err != nil {
						problems = append(problems, fmt.Sprintf("%s:%d: %s: no such file", page, n+1, target))
						continue
					}
				}
				if anchor == "" || !strings.HasSuffix(dest, ".md") {
					continue
				}
				a, err := anchorsOf(dest)
				if err != nil {
					return nil, err
				}
				if !a[anchor] {
					problems = append(problems, fmt.Sprintf("%s:%d: %s: no heading with that anchor in %s", page, n+1, target, dest))
				}
			}
		}
	}
	sort.Strings(problems)
	return problems, nil
}

// headings are the anchors GitHub gives a page's headings (outside code
// blocks): slug, then slug-1, slug-2 for repeats.
func headings(page string) (map[string]bool, error) {
	f, err := os.Open(page)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	anchors := map[string]bool{}
	seen := map[string]int{}
	fenced := false
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 1<<20), 1<<20)
	for s.Scan() {
		line := s.Text()
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		m := heading.FindStringSubmatch(line)
		if fenced || m == nil {
			continue
		}
		slug := Slug(m[1])
		if k := seen[slug]; k > 0 {
			anchors[fmt.Sprintf("%s-%d", slug, k)] = true
		} else {
			anchors[slug] = true
		}
		seen[slug]++
	}
	return anchors, s.Err()
}

// Slug is GitHub's anchor of a heading: lower case, code spans and link
// syntax dropped to their text, every character but letters, digits,
// spaces, hyphens and underscores removed, spaces as hyphens.
func Slug(heading string) string {
	heading = link.ReplaceAllStringFunc(heading, func(m string) string {
		return m[strings.Index(m, "[")+1 : strings.Index(m, "]")]
	})
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}
