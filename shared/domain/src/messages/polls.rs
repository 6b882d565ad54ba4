//! The poll model: a poll as created (validated, then fixed), as stored and as shown with its
//! tallies, and a vote. Voting is `crate::service::polls`.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::error::{Error, Result};
use crate::text::plain_text;

pub const MAX_QUESTION_CHARS: usize = 300;
pub const MAX_OPTION_CHARS: usize = 100;

crate::text_field!(
    /// A poll's question in the document.
    PollQuestion, 1, MAX_QUESTION_CHARS, crate::text::ONE_LINE
);
crate::text_field!(
    /// One poll option in the document.
    PollOptionText, 1, MAX_OPTION_CHARS, crate::text::ONE_LINE
);
pub const MIN_OPTIONS: usize = 2;
pub const MAX_OPTIONS: usize = 10;

/// A poll as a member creates it. Plain text; shown as text.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NewPoll {
    /// 1..=300 characters, trimmed, on one line.
    #[schema(value_type = PollQuestion, inline)]
    pub question: String,
    /// 2..=10 distinct options of 1..=100 characters; they get the ids "1", "2", … in this
    /// order.
    #[schema(min_items = 2, max_items = 10, value_type = Vec<PollOptionText>)]
    pub options: Vec<String>,
}

/// A poll as stored: its question and options, nothing about votes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PollDefinition {
    question: String,
    options: Vec<StoredOption>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct StoredOption {
    id: String,
    text: String,
}

/// A poll as clients see it, with the votes counted at read time.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Poll {
    pub question: String,
    pub options: Vec<PollOption>,
    /// The option the reader voted for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub my_vote: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PollOption {
    pub id: String,
    pub text: String,
    pub votes: u32,
}

/// A vote; `null` withdraws the caller's vote.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Vote {
    pub option_id: Option<String>,
}

impl NewPoll {
    pub fn validate(&self) -> Result<Poll> {
        let question = plain_text(&self.question, "a poll question", 1, MAX_QUESTION_CHARS)?;
        if !(MIN_OPTIONS..=MAX_OPTIONS).contains(&self.options.len()) {
            return Err(Error::validation(format!(
                "a poll has {MIN_OPTIONS}..={MAX_OPTIONS} options"
            )));
        }
        let mut options: Vec<PollOption> = Vec::with_capacity(self.options.len());
        for (index, text) in self.options.iter().enumerate() {
            let text = plain_text(text, "a poll option", 1, MAX_OPTION_CHARS)?;
            if options.iter().any(|o| o.text == text) {
                return Err(Error::validation(format!("the option {text:?} appears twice")));
            }
            options.push(PollOption {
                id: (index + 1).to_string(),
                text,
                votes: 0,
            });
        }
        Ok(Poll {
            question,
            options,
            my_vote: None,
        })
    }

    /// The words the word filter reads.
    pub fn words(&self) -> String {
        std::iter::once(self.question.as_str())
            .chain(self.options.iter().map(String::as_str))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

impl Poll {
    pub fn definition(&self) -> PollDefinition {
        PollDefinition {
            question: self.question.clone(),
            options: self
                .options
                .iter()
                .map(|o| StoredOption {
                    id: o.id.clone(),
                    text: o.text.clone(),
                })
                .collect(),
        }
    }

    /// Counts one vote for `option` (a vote for an option that no longer exists is ignored).
    pub fn count(&mut self, option: &str, mine: bool) {
        if let Some(o) = self.options.iter_mut().find(|o| o.id == option) {
            o.votes += 1;
            if mine {
                self.my_vote = Some(option.to_owned());
            }
        }
    }
}

impl From<PollDefinition> for Poll {
    fn from(stored: PollDefinition) -> Poll {
        Poll {
            question: stored.question,
            options: stored
                .options
                .into_iter()
                .map(|o| PollOption {
                    id: o.id,
                    text: o.text,
                    votes: 0,
                })
                .collect(),
            my_vote: None,
        }
    }
}
