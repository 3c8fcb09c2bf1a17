import type { FastifyBaseLogger, FastifyServerOptions } from 'fastify'

type Bindings = Parameters<FastifyBaseLogger['child']>[0]
type ChildOptions = Parameters<FastifyBaseLogger['child']>[1]
type Level = 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace'
type LogArgs = Parameters<FastifyBaseLogger['info']>

/** The parent's check of a level: pino's own, or none (a logger without it gets eager children, as before). */
interface LevelAware {
  isLevelEnabled(level: string): boolean
}

function levelAware(logger: FastifyBaseLogger): logger is FastifyBaseLogger & LevelAware {
  return typeof (logger as Partial<LevelAware>).isLevelEnabled === 'function'
}

/**
 * Fastify gives every request a child logger bound to its request id. A pino child is made eagerly (an object, its
 * bindings serialized), yet most requests log nothing at the configured level. This one is made when a line at an
 * enabled level is first written, and behaves as that child from then on; a line below the level costs one check.
 */
class LazyChildLogger implements FastifyBaseLogger {
  #child: FastifyBaseLogger | null = null

  constructor(
    private readonly parent: FastifyBaseLogger & LevelAware,
    private readonly bindings: Bindings,
    private readonly options: ChildOptions,
  ) {}

  #real(): FastifyBaseLogger {
    return (this.#child ??= this.parent.child(this.bindings, this.options))
  }

  #write(level: Level, args: LogArgs): void {
    // A child whose level was changed on its own decides for itself; otherwise the parent's level does.
    if (this.#child === null && !this.parent.isLevelEnabled(level)) return
    ;(this.#real()[level] as (...a: LogArgs) => void)(...args)
  }

  get level(): string {
    return this.#child?.level ?? this.parent.level
  }

  set level(level: string) {
    this.#real().level = level
  }

  fatal(...args: LogArgs): void {
    this.#write('fatal', args)
  }

  error(...args: LogArgs): void {
    this.#write('error', args)
  }

  warn(...args: LogArgs): void {
    this.#write('warn', args)
  }

  info(...args: LogArgs): void {
    this.#write('info', args)
  }

  debug(...args: LogArgs): void {
    this.#write('debug', args)
  }

  trace(...args: LogArgs): void {
    this.#write('trace', args)
  }

  silent(): void {}

  child(bindings: Bindings, options?: ChildOptions): FastifyBaseLogger {
    return this.#real().child(bindings, options)
  }
}

/** Fastify's `childLoggerFactory`: request loggers made on first use (LazyChildLogger). */
export const lazyChildLoggerFactory: NonNullable<FastifyServerOptions['childLoggerFactory']> = (logger, bindings, options) =>
  levelAware(logger) ? new LazyChildLogger(logger, bindings, options) : logger.child(bindings, options)
