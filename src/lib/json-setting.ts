/**
 * The value of a setting that holds structured data: the config file gives it as JSON already parsed, the environment
 * and the command line as its JSON text. Text is parsed here; blank text is `undefined` (each setting says what an
 * empty value means). `badJson` makes the setting's own error, with an example of the expected shape.
 */
export function jsonSetting(raw: unknown, badJson: () => Error): unknown {
  if (typeof raw !== 'string') return raw
  if (raw.trim() === '') return undefined
  try {
    return JSON.parse(raw) as unknown
  } catch {
    throw badJson()
  }
}
