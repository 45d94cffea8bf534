package rules

import (
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
)

var (
	urlRE     = regexp.MustCompile(`(?i)\b(?:https?://|www\.)\S+`)
	mentionRE = mustFilter(`@\S+`)
	wordRE    = regexp.MustCompile(`[\p{L}\p{N}]+`)
)

// mayHaveURL is false when s holds no match of urlRE: every match holds "://" or
// "www." in any case. It spares the case-folding regexp most messages.
func mayHaveURL(s string) bool {
	if strings.Contains(s, "://") {
		return true
	}
	for i := strings.IndexByte(s, '.'); i >= 0; {
		if i >= 3 && strings.EqualFold(s[i-3:i], "www") {
			return true
		}
		j := strings.IndexByte(s[i+1:], '.')
		if j < 0 {
			break
		}
		i += 1 + j
	}
	return false
}

// withoutURLs is s with every match of urlRE replaced by a space.
func withoutURLs(s string) string {
	if !mayHaveURL(s) {
		return s
	}
	return urlRE.ReplaceAllString(s, " ")
}

// ackWords are whole-message acknowledgements and social replies in English; a
// message made only of these (and mentions, punctuation, emoji) is not timeline-worthy.
var ackWords = setOf(
	"1", "ok", "okay", "k", "kk", "okok", "thanks", "thank", "you", "all", "thx", "ty", "tks", "tysm",
	"got", "it", "ack", "acked", "roger", "that", "sure", "noted", "will", "do", "on", "lgtm",
	"yes", "yep", "yeah", "yup", "no", "nope", "np", "cool", "nice", "great", "awesome", "good",
	"perfect", "sounds", "copy", "agreed", "agree", "done", "lol", "haha", "hahaha", "ha", "hi",
	"hello", "hey", "morning", "sorry", "welcome", "cheers", "appreciate", "much", "so", "very",
	"guys", "team", "folks", "everyone", "here", "joining", "joined", "me", "too", "same",
	"please", "pls", "i", "m", "im",
)

// ackPhrasesZH are Chinese acknowledgements; a run of Han characters made only of
// these is an acknowledgement.
var ackPhrasesZH = []string{
	"收到了", "收到", "好的", "好嘞", "好滴", "好", "嗯嗯", "嗯", "谢谢大家", "谢谢", "感谢", "多谢",
	"明白了", "明白", "了解了", "了解", "知道了", "没问题", "可以的", "可以", "行", "对的", "对",
	"是的", "辛苦了", "辛苦", "哈哈哈", "哈哈", "哈", "大家好", "早上好", "早", "在的", "在", "我在",
	"加一", "同意", "赞", "棒", "啊", "呀", "哦", "噢", "喔", "了", "的", "哈喽", "你好", "大家",
}

func setOf(words ...string) map[string]struct{} {
	m := make(map[string]struct{}, len(words))
	for _, w := range words {
		m[w] = struct{}{}
	}
	return m
}

var apostrophes = strings.NewReplacer("’", "'", "‘", "'", "＇", "'")

// normalizeForMatch lower-cases text and unifies typographic apostrophes.
func normalizeForMatch(s string) string {
	s = strings.ToLower(s)
	return apostrophes.Replace(s)
}

// collapse makes one clean line of s: invalid UTF-8 becomes U+FFFD, control
// characters become spaces, and whitespace runs (newlines included) become one space.
// Drafts built from it always pass synth.Validate's character checks.
func collapse(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
	return strings.Join(strings.Fields(s), " ")
}

// isAck reports whether a message is only an acknowledgement or social reply.
func isAck(text string) bool {
	t := mentionRE.ReplaceAllString(normalizeForMatch(text), " ")
	t = strings.ReplaceAll(t, "+1", " 1 ")
	words := wordRE.FindAllString(t, -1)
	if len(words) == 0 {
		return false // no words at all: emoji or punctuation only, handled as no content
	}
	for _, w := range words {
		if !hasHan(w) {
			if _, ok := ackWords[w]; !ok {
				return false
			}
			continue
		}
		if !ackHan(w) {
			return false
		}
	}
	return true
}

// ackHan reports whether a word containing Han characters splits entirely into
// Chinese acknowledgement phrases (and ASCII ack words such as "ok的").
func ackHan(w string) bool {
	for w != "" {
		matched := false
		for _, p := range ackPhrasesZH {
			if strings.HasPrefix(w, p) {
				w, matched = w[len(p):], true
				break
			}
		}
		if matched {
			continue
		}
		// An ASCII prefix such as "ok" in "ok的".
		i := strings.IndexFunc(w, func(r rune) bool { return r >= utf8.RuneSelf })
		if i <= 0 {
			return false
		}
		if _, ok := ackWords[w[:i]]; !ok {
			return false
		}
		w = w[i:]
	}
	return true
}

func hasHan(s string) bool {
	for _, r := range s {
		if unicode.Is(unicode.Han, r) {
			return true
		}
	}
	return false
}

// content measures what is left of a message once links and mentions are removed:
// Latin words of two or more letters, Han characters, and whether there was a link.
func content(text string) (words, han int, hadLink bool) {
	hadLink = mayHaveURL(text) && urlRE.MatchString(text)
	t := withoutURLs(text)
	t = mentionRE.ReplaceAllString(t, " ")
	for _, w := range wordRE.FindAllString(t, -1) {
		latin := 0
		for _, r := range w {
			if unicode.Is(unicode.Han, r) {
				han++
			} else {
				latin++
			}
		}
		if latin >= 2 || (latin >= 1 && hasDigit(w)) {
			words++
		}
	}
	return words, han, hadLink
}

func hasDigit(s string) bool {
	return strings.IndexFunc(s, unicode.IsDigit) >= 0
}

// sentences splits text into sentences, keeping each terminator with its sentence.
// A '.' ends a sentence only before whitespace or the end (so "v1.2.3" and "0.5%"
// stay whole); CJK terminators, '!', '?', ';' and newlines always end one.
func sentences(text string) []string {
	var out []string
	start := 0
	flush := func(end int) {
		if s := strings.TrimSpace(text[start:end]); s != "" {
			out = append(out, s)
		}
		start = end
	}
	for i, r := range text {
		size := utf8.RuneLen(r)
		switch r {
		case '\n', '!', '?', ';', '。', '！', '？', '；':
			flush(i + size)
		case '.':
			next := i + size
			if next >= len(text) || text[next] == ' ' || text[next] == '\t' || text[next] == '\n' {
				flush(next)
			}
		}
	}
	flush(len(text))
	return out
}

// truncate bounds s to n runes, ending a cut string with "…".
func truncate(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return strings.TrimRightFunc(string(r[:n-1]), unicode.IsSpace) + "…"
}

// normTitle is the comparison form of a title for repeated-status detection.
func normTitle(s string) string {
	return strings.Join(wordRE.FindAllString(strings.ToLower(s), -1), " ")
}
