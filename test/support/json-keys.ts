// The keys that appear more than once at the top level of one JSON object text. JSON.parse
// keeps the last of repeated keys silently, so a log line's repeats can only be seen by
// scanning the text: strings are skipped (with their escapes), depth counted across {} and [].

export function duplicateTopLevelKeys(text: string): string[] {
  const seen = new Set<string>();
  const repeated: string[] = [];
  let depth = 0;
  let expectKey = false;
  for (let i = 0; i < text.length; i++) {
    const ch = text[i];
    if (ch === '"') {
      const end = stringEnd(text, i);
      if (depth === 1 && expectKey) {
        const key = JSON.parse(text.slice(i, end + 1)) as string;
        if (seen.has(key)) repeated.push(key);
        seen.add(key);
        expectKey = false;
      }
      i = end;
    } else if (ch === "{" || ch === "[") {
      depth++;
      if (depth === 1) expectKey = true;
    } else if (ch === "}" || ch === "]") {
      depth--;
    } else if (ch === "," && depth === 1) {
      expectKey = true;
    }
  }
  return repeated;
}

/** Index of the quote that closes the string opening at `start`. */
function stringEnd(text: string, start: number): number {
  for (let i = start + 1; i < text.length; i++) {
    if (text[i] === "\\") i++;
    else if (text[i] === '"') return i;
  }
  throw new Error(`unterminated string at ${start}`);
}
