/**
 * The one place that hides credentials from text an operator or a log will read. Settings may carry them: a
 * PostgreSQL or Redis URL's password (`postgres://user:password@host/db`, `redis://:password@host`, also a URL that
 * lost a slash, `postgres:/user:password@host`) or a `password=` query parameter; a driver's error may quote them
 * back. Every password in `text` becomes `…`; the scheme, user, host and database stay, to say which server is meant.
 * ConfigError masks its message with it (every start-up error), and so does whatever logs or prints a setting.
 */
export function maskCredentials(text: string): string {
  return text
    // The password runs to the last `@` before the host (a password may hold an unescaped `@`, a host never does), and
    // stops where a quoted URL would end.
    .replace(/([a-z][a-z0-9+.-]*:\/\/?[^\s/@:"'`<>]*):[^\s/"'`<>]*@/gi, '$1:…@')
    .replace(/([?&](?:password|sslpassword)=)[^&\s"'#]*/gi, '$1…')
}
