import type { Config } from '../config.js'
import type { Repos } from '../db/repos/index.js'

/**
 * One command of the command line, declared once: what its help and the global usage show, which options it takes,
 * and what it may do to the database. The table of them is commands.ts; parsing and help are usage.ts.
 */
export interface Command {
  /** Its words: `serve`, `keys create`. */
  readonly name: string
  /** Its arguments in its usage line, each `<…>` required: `<email>`. */
  readonly args?: string
  /** What it does, for the global usage and its own help. */
  readonly about: string
  /** More usage lines shown under it in the global usage (`serve --profile conformance`), with what each does. */
  readonly variants?: ReadonlyArray<readonly [usage: string, about: string]>
  /** Its own options (the settings' flags come on top, for every command). */
  readonly options?: readonly Option[]
  /**
   * What it may do when SERVICE_DATABASE names a SQLite file that does not exist: `create` it (the server, `migrate`,
   * and what works on an empty database), or refuse with exit code 2 and create nothing (`existing`: what reads, or
   * changes what only an existing database can hold). docs/decisions/operator-interface.md.
   */
  readonly database: 'create' | 'existing'
  /** Settings it reads besides SERVICE_DATABASE and SERVICE_CONFIG, for its help (`all`: the server's). */
  readonly settings?: readonly (keyof Config)[] | 'all'
  /** It opens env var values: on PostgreSQL it needs the env key as the server does (config.ts's requireEnvKey). */
  readonly needsEnvKey?: boolean
  /**
   * It changes what a credential resolves to: beside servers that cache credentials it goes through the revocation
   * barrier (db/open-repos.ts).
   */
  readonly changesCredentials?: boolean
  run(context: Context): Promise<void>
}

export interface Option {
  /** `--org` */
  readonly flag: string
  /** The value it takes, as its usage shows it (`<slug>`); none for a switch. */
  readonly value?: string
  readonly about: string
}

export interface Context {
  /** Its arguments, as many as its usage line names (usage.ts checks the count). */
  readonly args: readonly string[]
  /** Its own options as given, by flag without the dashes; a switch is `'true'`. */
  readonly options: Readonly<Record<string, string>>
  /** The settings' flags as given (`serve` hands them to the server). */
  readonly settingsArgv: readonly string[]
  /** The settings, checked before the command runs. */
  readonly config: Config
  /**
   * The repositories on SERVICE_DATABASE, opened at first use as the command declares (created or refused when
   * missing, behind the credential barrier or not) and closed after it.
   */
  repos(): Promise<Repos>
  /** One line on stdout. */
  out(line: string): void
  /** A warning on stderr. */
  warn(message: string): void
}

/** A check that found a problem (exit code 1): one line saying what, after what the command printed. */
export class CheckFailed extends Error {}

/** A mistake in the command line (exit code 2), with the help to point at: the command's, or the global one. */
export class UsageError extends Error {
  constructor(message: string, readonly command?: string) {
    super(message)
  }
}
