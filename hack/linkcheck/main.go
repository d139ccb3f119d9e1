// Command linkcheck checks the repository's Markdown links (make verify):
// every relative link names a file or folder that exists, and every
// #anchor a heading of its page, as GitHub renders it. Links to other
// sites are left alone (CI has no network).
//
//	linkcheck [ROOT]
package main

import (
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
	// Each page is read once: for its links, and for its anchors when a
	// link names one.
	texts := map[string]string{}
	read := func(page string) (string, error) {
		if t, ok := texts[page]; ok {
			return t, nil
		}
		raw, err := os.ReadFile(page)
		texts[page] = string(raw)
		return string(raw), err
	}
	anchors := map[string]map[string]bool{}
	anchorsOf := func(page string) (map[string]bool, error) {
		if a, ok := anchors[page]; ok {
			return a, nil
		}
		text, err := read(page)
		if err != nil {
			return nil, err
		}
		anchors[page] = headings(text)
		return anchors[page], nil
	}
	var problems []string
	for _, page := range pages {
		text, err := read(page)
		if err != nil {
			return nil, err
		}
		for _, l := range prose(text) {
			for _, m := range link.FindAllStringSubmatch(codeSpan.ReplaceAllString(l.text, ""), -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				file, anchor, _ := strings.Cut(target, "#")
				dest := page
				if file != "" {
					dest = filepath.Join(filepath.Dir(page), file)
					if _, err := os.Stat(dest); err != nil {
						problems = append(problems, fmt.Sprintf("%s:%d: %s: no such file", page, l.n, target))
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
					problems = append(problems, fmt.Sprintf("%s:%d: %s: no heading with that anchor in %s", page, l.n, target, dest))
				}
			}
		}
	}
	sort.Strings(problems)
	return problems, nil
}

// line is a line of a page and its number (from 1).
type line struct {
	n    int
	text string
}

// prose is a page's lines outside fenced code blocks (the fences too are
// left out): what holds its links and headings.
func prose(page string) []line {
	var out []line
	fenced := false
	for i, text := range strings.Split(page, "\n") {
		if strings.HasPrefix(strings.TrimSpace(text), "```") {
			fenced = !fenced
			continue
		}
		if !fenced {
			out = append(out, line{n: i + 1, text: text})
		}
	}
	return out
}

// headings are the anchors GitHub gives a page's headings (outside code
// blocks): slug, then slug-1, slug-2 for repeats.
func headings(page string) map[string]bool {
	anchors := map[string]bool{}
	seen := map[string]int{}
	for _, l := range prose(page) {
		m := heading.FindStringSubmatch(l.text)
		if m == nil {
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
	return anchors
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
