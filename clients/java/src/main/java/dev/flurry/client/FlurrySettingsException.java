package dev.flurry.client;

/**
 * A bad setting given to {@link FlurryClient.Builder#build()}: an {@link IllegalArgumentException},
 * as Java raises for a bad argument (a programming error, never retried). The message starts with
 * the setting's name and a colon ({@code minBatch: 600 is larger than maxBatch 500}).
 */
public final class FlurrySettingsException extends IllegalArgumentException {
  private static final long serialVersionUID = 1L;

  private final String setting;

  FlurrySettingsException(String setting, String why) {
    super(setting + ": " + why);
    this.setting = setting;
  }

  /** The setting at fault, as the builder spells it ({@code maxAge}, {@code endpoints}, ...). */
  public String setting() {
    return setting;
  }
}
