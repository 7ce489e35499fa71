//! Numbers written in words (`two hundred ten`, `cento e cinquenta reais`, `número trezentos e
//! doze`) as the digits they say. The typed parsers of PR-1 do not read them (a number in words is
//! no typed form: the model reads it); the embeddings interpreter, which stands in for a language
//! model, reads the message through [`as_digits`] as such a model would.
//!
//! Only a run that is plainly a number is rewritten: two number words or more (`twenty five`,
//! `vinte e cinco`), or one word worth ten or more (`fifteen`, `duzentos`). A lone small word
//! stays a word: `one`, `um`, `uma` are as often an article (`um pedido`, `the new one`) as a
//! number. Words must follow the grammar of a number (`trezentos e doze`, not `dois e três`); a
//! run stops at the first word that breaks it. Both locales' words are read in every message:
//! customers mix them.
//!
//! Voice-to-text dictates codes digit by digit (`zero four five three eight one three three`,
//! `três dois nove zero zero seis`): three digit words or more in a row, apart only by spaces,
//! hyphens or commas, are one string of digits, leading zeros kept. Letters spelled out just
//! before such a run (`P E D nine nine nine nine`, `pê é dê três dois…`) are the code's
//! prefix, joined into one word (`PED 9999`): two single letters or more, or pt-BR letter names
//! written with their accent (`pê`, `dê`; unaccented `de`, `e` are words).

use std::borrow::Cow;
use std::ops::Range;

use super::text::words;

/// A word of the message: its span and its folded form.
type Folded = (Range<usize>, String);

/// `text` with every spelled number rewritten as digits (borrowed when it has none).
pub fn as_digits(text: &str) -> Cow<'_, str> {
    as_digits_in(text, false)
}

/// [`as_digits`] for a message that answers a question for an amount: money is named by the
/// question, so two numbers in a row are a price (`it was forty nine ninety`) as they are
/// beside a word for money.
pub fn as_digits_in(text: &str, money_asked: bool) -> Cow<'_, str> {
    let words = words(text);
    let mut out = String::new();
    let mut last = 0;
    let mut i = 0;
    while i < words.len() {
        if let Some(len) = digit_run(text, &words[i..]) {
            let first = spelled_prefix(text, &words, i, last);
            out.push_str(&text[last..words[first].0.start]);
            for (span, _) in &words[first..i] {
                out.extend(letter_of(&text[span.clone()]));
            }
            if first < i {
                out.push(' ');
            }
            for (_, w) in &words[i..i + len] {
                if let Some(Word::Unit(v)) = word(w) {
                    out.push_str(&v.to_string());
                }
            }
            last = words[i + len - 1].0.end;
            i += len;
            continue;
        }
        match number_run(&words[i..]).filter(|&(len, _)| !approximate(&words, i, len)) {
            Some((len, value)) => {
                if let Some((end, price)) = price_at(text, &words, (i, len, value), money_asked) {
                    out.push_str(&text[last..words[i].0.start]);
                    out.push_str(&price);
                    last = words[end - 1].0.end;
                    i = end;
                    continue;
                }
                let adjacent = adjacent_runs(text, &words, i + len);
                if adjacent > 0 {
                    i += len + adjacent;
                    continue;
                }
                out.push_str(&text[last..words[i].0.start]);
                out.push_str(&value.to_string());
                last = words[i + len - 1].0.end;
                i += len;
            }
            None => i += 1,
        }
    }
    if last == 0 && out.is_empty() {
        return Cow::Borrowed(text);
    }
    out.push_str(&text[last..]);
    Cow::Owned(out)
}

/// A price said as two numbers (`forty nine ninety`, `sessenta e nove e noventa`, `seventy-one
/// reais and ninety-nine cents`) starting with the run of `len` words at `at` worth `units`: the
/// end of the words it takes and the amount (`49.90`). The cents are one run worth 10..=99 (or,
/// before `cents`/`centavos`, 1..=99). Said right after the first (`forty nine ninety`) it is a
/// price only with money named in the message (`charge`, `cobrança`, `reais`) or asked for
/// ([`as_digits_in`]): `nineteen ninety` is as often a year; after `e` (`vinte e nove e
/// noventa`, which no number's grammar allows) it always is, but for a time or a range (`às dez
/// e vinte`, `entre dez e vinte`).
fn price_at(
    text: &str,
    words: &[Folded],
    (at, len, units): (usize, usize, u64),
    money_asked: bool,
) -> Option<(usize, String)> {
    const CURRENCY: &[&str] = &["reais", "real", "dollars", "dollar", "bucks"];
    const CENTS: &[&str] = &["cents", "cent", "centavos", "centavo"];
    const MONEY: &[&str] = &[
        "charge", "charged", "charges", "cost", "costs", "fee", "fees", "price", "paid", "pay",
        "bill", "amount", "total", "refund", "cobranca", "cobraram", "cobrou", "cobrado",
        "cobrada", "valor", "taxa", "fatura", "paguei", "preco", "custa", "custou", "reais",
        "real", "dollars", "bucks",
    ];
    const TIME_OR_RANGE: &[&str] = &[
        "as", "das", "entre", "at", "between", "from", "in", "since", "em", "desde", "ano", "year",
    ];
    const TIME_AFTER: &[&str] = &["horas", "hora", "minutos", "h", "oclock"];
    let folded = |k: usize| words.get(k).map(|(_, w)| w.as_str());
    let before = at.checked_sub(1).and_then(folded);
    if !(1..=9999).contains(&units) || before.is_some_and(|w| TIME_OR_RANGE.contains(&w)) {
        return None;
    }
    let cents_run = |from: usize, least: u64| {
        // Before `cents` a lone digit word is a number too (`e cinco centavos`).
        let lone = || match word(&words.get(from)?.1) {
            Some(Word::Unit(v)) if least == 1 => Some((1, v)),
            _ => None,
        };
        let (n, cents) = number_run(words.get(from..)?).or_else(lone)?;
        ((least..=99).contains(&cents) && !approximate(words, from, n)).then_some((from + n, cents))
    };
    let k = at + len;
    // `seventy-one reais and ninety-nine cents`
    if folded(k).is_some_and(|w| CURRENCY.contains(&w))
        && matches!(folded(k + 1), Some("and" | "e"))
    {
        let (end, cents) = cents_run(k + 2, 1)?;
        return folded(end)
            .is_some_and(|w| CENTS.contains(&w))
            .then(|| (end + 1, format!("{units}.{cents:02} {}", words[k].1)));
    }
    let after_e = folded(k) == Some("e");
    let from = if after_e { k + 1 } else { k };
    let adjacent = from < words.len()
        && text[words[from - 1].0.end..words[from].0.start]
            .chars()
            .all(|c| c.is_whitespace() || c == '-');
    if !adjacent {
        return None;
    }
    let (end, cents) = cents_run(from, 10)?;
    // A third number or a time after it: no price (`forty nine ninety nine one`, `dez e vinte h`).
    let next = folded(end);
    if next.is_some_and(|w| {
        TIME_AFTER.contains(&w) || word(w).is_some_and(|n| n != Word::And && n != Word::A)
    }) {
        return None;
    }
    let money = money_asked || words.iter().any(|(_, w)| MONEY.contains(&w.as_str()));
    (after_e || money).then(|| (end, format!("{units}.{cents:02}")))
}

/// How many words the number runs right after a run ending before `at` take (only spaces or a
/// hyphen apart). Two numbers in a row are no one value: `forty nine ninety` is a price (49.90),
/// `nineteen ninety` a year; both are left as words, for the model.
fn adjacent_runs(text: &str, words: &[Folded], at: usize) -> usize {
    let mut end = at;
    while end < words.len() && end > 0 {
        let gap = &text[words[end - 1].0.end..words[end].0.start];
        if !gap.chars().all(|c| c.is_whitespace() || c == '-') {
            break;
        }
        match number_run(&words[end..]) {
            Some((len, _)) => end += len,
            None => break,
        }
    }
    end - at
}

/// The length of a dictated run of digit words at the start of `words` (module doc): three or
/// more, apart only by spaces, hyphens or commas.
fn digit_run(text: &str, words: &[Folded]) -> Option<usize> {
    let mut len = 0;
    for (k, (span, folded)) in words.iter().enumerate() {
        let apart = k == 0
            || text[words[k - 1].0.end..span.start]
                .chars()
                .all(|c| c.is_whitespace() || c == '-' || c == ',');
        if !apart || !matches!(word(folded), Some(Word::Unit(_))) {
            break;
        }
        len += 1;
    }
    (len >= 3).then_some(len)
}

/// The index of the first of the spelled letters just before the word at `at` (`at` itself
/// when fewer than two), not reaching back past `floor` (text already rewritten).
fn spelled_prefix(text: &str, words: &[Folded], at: usize, floor: usize) -> usize {
    let mut first = at;
    while first > 0 {
        let (span, _) = &words[first - 1];
        let adjacent = text[span.end..words[first].0.start]
            .chars()
            .all(|c| c.is_whitespace() || c == '-' || c == '.');
        if span.start < floor || !adjacent || letter_of(&text[span.clone()]).is_none() {
            break;
        }
        first -= 1;
    }
    if at - first >= 2 {
        first
    } else {
        at
    }
}

/// A word that spells one letter: a single Latin letter, or a pt-BR letter name written with
/// its accent.
fn letter_of(raw: &str) -> Option<char> {
    let mut chars = raw.chars();
    if let (Some(c), None) = (chars.next(), chars.next()) {
        if c.is_ascii_alphabetic() {
            return Some(c.to_ascii_uppercase());
        }
    }
    Some(match raw.to_lowercase().as_str() {
        "bê" => 'B',
        "cê" => 'C',
        "dê" => 'D',
        "é" | "ê" => 'E',
        "éfe" => 'F',
        "gê" => 'G',
        "agá" => 'H',
        "cá" => 'K',
        "éle" => 'L',
        "ême" | "eme" => 'M',
        "êne" => 'N',
        "ó" => 'O',
        "pê" => 'P',
        "quê" => 'Q',
        "érre" | "erre" => 'R',
        "ésse" | "esse" => 'S',
        "tê" => 'T',
        "vê" => 'V',
        "xis" => 'X',
        "zê" => 'Z',
        _ => return None,
    })
}

/// Whether the run of `len` words at `at` is an approximation (`uns trinta e pouco`, `around
/// seventy`, `fifty or so`, `twenty-something`): no value to read.
fn approximate(words: &[Folded], at: usize, len: usize) -> bool {
    const BEFORE: &[&str] = &[
        "uns",
        "umas",
        "cerca",
        "quase",
        "tipo",
        "aproximadamente",
        "around",
        "about",
        "roughly",
        "approximately",
        "almost",
        "nearly",
        "like",
    ];
    const AFTER: &[&[&str]] = &[
        &["e", "pouco"],
        &["e", "poucos"],
        &["e", "poucas"],
        &["or", "so"],
        &["something"],
        &["mais", "ou", "menos"],
    ];
    let word = |k: usize| words.get(k).map(|(_, w)| w.as_str());
    let before = at.checked_sub(1).and_then(word);
    // `cerca de setenta`: the approximating word stands before the preposition.
    let two_before = at.checked_sub(2).and_then(word);
    let after = AFTER.iter().any(|phrase| {
        phrase
            .iter()
            .enumerate()
            .all(|(k, p)| word(at + len + k) == Some(*p))
    });
    before.is_some_and(|w| BEFORE.contains(&w))
        || (two_before == Some("cerca") && before == Some("de"))
        || after
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Word {
    /// 0..=9.
    Unit(u64),
    /// 10..=19.
    Teen(u64),
    /// 20, 30, …, 90.
    Tens(u64),
    /// 100, 200, …, 900 as one word (pt-BR `cem`, `duzentos`).
    Hundreds(u64),
    /// en `hundred`: multiplies the unit before it.
    Hundred,
    /// `thousand`, `mil`: multiplies what came before it (or 1).
    Thousand,
    /// `and`, `e` between two number words.
    And,
    /// en `a` before `hundred` / `thousand`.
    A,
}

/// A folded word as a number word.
fn word(w: &str) -> Option<Word> {
    use Word::*;
    Some(match w {
        "zero" => Unit(0),
        "one" | "um" | "uma" => Unit(1),
        "two" | "dois" | "duas" => Unit(2),
        "three" | "tres" => Unit(3),
        "four" | "quatro" => Unit(4),
        "five" | "cinco" => Unit(5),
        "six" | "seis" => Unit(6),
        "seven" | "sete" => Unit(7),
        "eight" | "oito" => Unit(8),
        "nine" | "nove" => Unit(9),
        "ten" | "dez" => Teen(10),
        "eleven" | "onze" => Teen(11),
        "twelve" | "doze" => Teen(12),
        "thirteen" | "treze" => Teen(13),
        "fourteen" | "catorze" | "quatorze" => Teen(14),
        "fifteen" | "quinze" => Teen(15),
        "sixteen" | "dezesseis" | "dezasseis" => Teen(16),
        "seventeen" | "dezessete" | "dezassete" => Teen(17),
        "eighteen" | "dezoito" => Teen(18),
        "nineteen" | "dezenove" | "dezanove" => Teen(19),
        "twenty" | "vinte" => Tens(20),
        "thirty" | "trinta" => Tens(30),
        "forty" | "quarenta" => Tens(40),
        "fifty" | "cinquenta" | "cincoenta" => Tens(50),
        "sixty" | "sessenta" => Tens(60),
        "seventy" | "setenta" => Tens(70),
        "eighty" | "oitenta" => Tens(80),
        "ninety" | "noventa" => Tens(90),
        "cem" | "cento" => Hundreds(100),
        "duzentos" | "duzentas" => Hundreds(200),
        "trezentos" | "trezentas" => Hundreds(300),
        "quatrocentos" | "quatrocentas" => Hundreds(400),
        "quinhentos" | "quinhentas" => Hundreds(500),
        "seiscentos" | "seiscentas" => Hundreds(600),
        "setecentos" | "setecentas" => Hundreds(700),
        "oitocentos" | "oitocentas" => Hundreds(800),
        "novecentos" | "novecentas" => Hundreds(900),
        "hundred" => Hundred,
        "thousand" | "mil" => Thousand,
        "and" | "e" => And,
        "a" => A,
        _ => return None,
    })
}

/// A number being read word by word: the thousands closed, the group below a thousand, and the
/// last number word (what may follow it).
#[derive(Default)]
struct Reading {
    total: u64,
    group: u64,
    last: Option<Word>,
}

impl Reading {
    /// Takes the next number word when the grammar allows it.
    fn take(&mut self, w: Word) -> bool {
        use Word::*;
        match (self.last, w) {
            (Some(A), Hundred) => self.group = 100,
            (Some(A), Thousand) | (None, Thousand) => self.total = 1000,
            (None | Some(Thousand), Unit(v) | Teen(v) | Tens(v) | Hundreds(v)) => self.group = v,
            (Some(Hundreds(_) | Hundred), Unit(v) | Teen(v) | Tens(v)) => self.group += v,
            (Some(Tens(_)), Unit(v)) if v > 0 && self.group % 10 == 0 => self.group += v,
            (Some(Unit(u)), Hundred) if u > 0 && self.group < 10 => self.group *= 100,
            (Some(Unit(_) | Teen(_) | Tens(_) | Hundreds(_) | Hundred), Thousand)
                if self.total == 0 && self.group > 0 =>
            {
                self.total = self.group * 1000;
                self.group = 0;
            }
            _ => return false,
        }
        self.last = Some(w);
        true
    }

    fn value(&self) -> u64 {
        self.total + self.group
    }
}

/// The longest run of number words at the start of `words` that says a number, as `(words
/// taken, value)`; `None` when it is not plainly a number (module doc).
fn number_run(words: &[Folded]) -> Option<(usize, u64)> {
    let mut reading = Reading::default();
    let mut best: Option<(usize, u64, usize)> = None; // (words, value, number words)
    let mut counted = 0;
    let mut after_and = false;
    for (k, (_, folded)) in words.iter().enumerate() {
        let Some(w) = word(folded) else {
            break;
        };
        match w {
            // `and` / `e` only between two number words.
            Word::And if after_and || matches!(reading.last, None | Some(Word::A)) => break,
            Word::And => after_and = true,
            Word::A if k == 0 => reading.last = Some(Word::A),
            w => {
                if !reading.take(w) {
                    break;
                }
                after_and = false;
                counted += 1;
                best = Some((k + 1, reading.value(), counted));
            }
        }
    }
    let (len, value, number_words) = best?;
    let plain = number_words >= 2 || (value >= 10 && value != 1000);
    plain.then_some((len, value))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn digits(text: &str) -> String {
        as_digits(text).into_owned()
    }

    #[test]
    fn spelled_numbers_read_as_digits_in_both_locales() {
        for (text, want) in [
            ("two hundred ten", "210"),
            ("number is two hundred and ten", "number is 210"),
            ("cento e cinquenta reais", "150 reais"),
            ("número trezentos e doze", "número 312"),
            ("twenty-five", "25"),
            ("vinte e cinco, por favor", "25, por favor"),
            ("mil duzentos e trinta e quatro", "1234"),
            ("a hundred and fifty dollars", "150 dollars"),
            ("fifteen", "15"),
            ("três mil e quinhentos", "3500"),
            ("cem reais", "100 reais"),
            ("Dezoito", "18"),
        ] {
            assert_eq!(digits(text), want, "{text}");
        }
    }

    #[test]
    fn dictated_digits_and_spelled_letters_read_as_a_code() {
        for (text, want) in [
            (
                "the zip code is zero four five three eight one three three",
                "the zip code is 04538133",
            ),
            (
                "my order ped five three seven two zero because i moved",
                "my order ped 53720 because i moved",
            ),
            (
                "the number is P E D nine nine nine nine",
                "the number is PED 9999",
            ),
            (
                "o pedido pê é dê três dois zero nove um quatro",
                "o pedido PED 320914",
            ),
            ("cep zero um três um zero, um zero zero", "cep 01310100"),
            (
                "o cep é zero um três um zero um zero zero e o numero da casa é quarenta e cinco",
                "o cep é 01310100 e o numero da casa é 45",
            ),
        ] {
            assert_eq!(digits(text), want, "{text}");
        }
        // Two digit words are no code (`one two` stays what it was); a letter alone or an
        // unaccented word is no spelled prefix.
        assert_eq!(digits("one or two"), "one or two");
        assert_eq!(digits("é de três dois um"), "é de 321");
        assert_eq!(digits("número a um dois três"), "número a 123");
    }

    #[test]
    fn approximations_are_no_value() {
        for text in [
            "uns trinta e pouco",
            "around seventy",
            "cerca de cem reais",
            "twenty-something",
            "fifty or so",
            "tipo cinquenta mais ou menos",
        ] {
            assert_eq!(digits(text), text, "{text}");
        }
    }

    #[test]
    fn articles_and_words_that_break_a_number_stay_words() {
        for text in [
            "quero mudar o endereço de um pedido",
            "the new one please",
            "I have a question",
            "dois e três",
            "mil desculpas",
            "e aí, tudo bem?",
            "one",
        ] {
            assert_eq!(digits(text), text, "{text}");
        }
        // Two numbers in a row with no money named are no one value (a year, two numbers):
        // left as words.
        assert_eq!(digits("twenty twenty"), "twenty twenty");
        assert_eq!(digits("nineteen ninety-nine"), "nineteen ninety-nine");
        assert_eq!(
            digits("i moved here in nineteen ninety"),
            "i moved here in nineteen ninety"
        );
    }

    #[test]
    fn a_price_said_as_two_numbers_reads_as_one_amount() {
        for (text, want) in [
            (
                "a charge of forty nine ninety for a movie",
                "a charge of 49.90 for a movie",
            ),
            (
                "theres a charge of forty-nine ninety-nine",
                "theres a charge of 49.99",
            ),
            ("foi vinte e nove e noventa", "foi 29.90"),
            (
                "uma cobrança de sessenta e nove e noventa que eu não sei",
                "uma cobrança de 69.90 que eu não sei",
            ),
            ("cento e cinco e cinquenta", "105.50"),
            ("seventy-one reais and ninety-nine cents", "71.99 reais"),
            ("trinta reais e cinco centavos", "30.05 reais"),
            ("they charged me twelve fifty", "they charged me 12.50"),
        ] {
            assert_eq!(digits(text), want, "{text}");
        }
        // With no money named, only when the question asked for an amount.
        assert_eq!(
            digits("it was forty nine ninety"),
            "it was forty nine ninety"
        );
        assert_eq!(
            as_digits_in("it was forty nine ninety", true),
            "it was 49.90"
        );
        // Not a price: a time, a range, a year beside money, cents with no currency said.
        for (text, want) in [
            ("às dez e vinte", "às 10 e 20"),
            ("entre dez e vinte reais", "entre 10 e 20 reais"),
            (
                "charged since twenty twenty four",
                "charged since twenty twenty four",
            ),
            (
                "a charge of forty nine ninety nine one",
                "a charge of forty nine ninety nine one",
            ),
        ] {
            assert_eq!(digits(text), want, "{text}");
        }
    }
}
